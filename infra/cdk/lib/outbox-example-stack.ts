// A table and a bus as the outbox needs them (docs/adopt.md, "What the
// table must have"), and the reusable stack deployed on them as its
// Serverless Application Repository application: nothing to build, the
// functions come with the application's version. `make test` synthesizes
// it (`cdk synth`, offline) and checks the template
// (infra/package/package.py check-cdk): the application's parameters are
// the stack's, the table's stream ARN is passed, the outputs are read.
import { CfnOutput, Stack, StackProps } from "aws-cdk-lib";
import * as dynamodb from "aws-cdk-lib/aws-dynamodb";
import * as events from "aws-cdk-lib/aws-events";
import * as sam from "aws-cdk-lib/aws-sam";
import { Construct } from "constructs";

export interface OutboxExampleProps extends StackProps {
  /** The application's ARN (the release notes give it). */
  readonly applicationId: string;
  /** The release to deploy (CHANGELOG.md). */
  readonly semanticVersion: string;
}

export class OutboxExampleStack extends Stack {
  constructor(scope: Construct, id: string, props: OutboxExampleProps) {
    super(scope, id, props);

    const key = (name: string) => ({ name, type: dynamodb.AttributeType.STRING });
    const table = new dynamodb.Table(this, "Orders", {
      partitionKey: key("PK"),
      sortKey: key("SK"),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      stream: dynamodb.StreamViewType.NEW_IMAGE,
      timeToLiveAttribute: "expiresAt",
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    });
    table.addGlobalSecondaryIndex({ indexName: "GSI1", partitionKey: key("GSI1PK"), sortKey: key("GSI1SK") });
    table.addGlobalSecondaryIndex({ indexName: "GSI2", partitionKey: key("GSI2PK"), sortKey: key("GSI2SK") });

    const bus = new events.EventBus(this, "Bus", { eventBusName: "orders" });

    const outbox = new sam.CfnApplication(this, "Outbox", {
      location: {
        applicationId: props.applicationId,
        semanticVersion: props.semanticVersion,
      },
      parameters: {
        TableName: table.tableName,
        TableStreamArn: table.tableStreamArn!,
        EventBusName: bus.eventBusName,
      },
    });

    // DashboardName exists only with Dashboard=true: not read here.
    for (const output of ["PublisherFunctionName", "SweeperFunctionName", "AlarmTopicArn"]) {
      new CfnOutput(this, output, { value: outbox.getAtt(`Outputs.${output}`).toString() });
    }
  }
}
