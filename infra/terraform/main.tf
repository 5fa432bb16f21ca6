# The reusable stack (infra/outbox.yaml) deployed from Terraform, as the
# Serverless Application Repository application `make release` publishes:
# nothing to build, the functions come with the application version.
# Next to it, a table and a bus as the stack needs them (docs/adopt.md,
# "What the table must have"). `tests/distribution.rs` checks that every
# parameter below is one of the stack's and that none it requires is
# missing; nothing here is applied by the tests.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

# The table: keys, the stream with new images, the pending and dead-letter
# indexes, TTL.
resource "aws_dynamodb_table" "orders" {
  name             = var.table_name
  billing_mode     = "PAY_PER_REQUEST"
  hash_key         = "PK"
  range_key        = "SK"
  stream_enabled   = true
  stream_view_type = "NEW_IMAGE"

  attribute {
    name = "PK"
    type = "S"
  }
  attribute {
    name = "SK"
    type = "S"
  }
  attribute {
    name = "GSI1PK"
    type = "S"
  }
  attribute {
    name = "GSI1SK"
    type = "S"
  }
  attribute {
    name = "GSI2PK"
    type = "S"
  }
  attribute {
    name = "GSI2SK"
    type = "S"
  }

  global_secondary_index {
    name            = "GSI1"
    hash_key        = "GSI1PK"
    range_key       = "GSI1SK"
    projection_type = "ALL"
  }
  global_secondary_index {
    name            = "GSI2"
    hash_key        = "GSI2PK"
    range_key       = "GSI2SK"
    projection_type = "ALL"
  }

  ttl {
    attribute_name = "expiresAt"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }
}

resource "aws_cloudwatch_event_bus" "orders" {
  name = var.bus_name
}

# The outbox relay on that table and bus.
resource "aws_serverlessapplicationrepository_cloudformation_stack" "outbox" {
  name             = "${var.table_name}-outbox"
  application_id   = var.application_id
  semantic_version = var.semantic_version
  # What the application's template creates (docs/adopt.md, "From the
  # Serverless Application Repository"): IAM roles, resource policies
  # (the queues' and the alarm topic's), and the SAM transform's expansion.
  capabilities = [
    "CAPABILITY_IAM",
    "CAPABILITY_RESOURCE_POLICY",
    "CAPABILITY_AUTO_EXPAND",
  ]
  parameters = {
    TableName      = aws_dynamodb_table.orders.name
    TableStreamArn = aws_dynamodb_table.orders.stream_arn
    EventBusName   = aws_cloudwatch_event_bus.orders.name
    AlarmEmail     = var.alarm_email
  }
}
