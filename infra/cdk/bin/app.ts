#!/usr/bin/env node
// The example app: one stack, the account and region from the environment
// when deployed (`cdk deploy`), none needed to synthesize.
import { App } from "aws-cdk-lib";
import { OutboxExampleStack } from "../lib/outbox-example-stack";

const app = new App();
new OutboxExampleStack(app, "OutboxExample", {
  applicationId: app.node.getContext("outbox:applicationId"),
  semanticVersion: app.node.getContext("outbox:semanticVersion"),
});
