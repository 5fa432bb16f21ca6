# The stack's outputs, as the application returns them.
output "publisher_function_name" {
  value = aws_serverlessapplicationrepository_cloudformation_stack.outbox.outputs["PublisherFunctionName"]
}

output "sweeper_function_name" {
  value = aws_serverlessapplicationrepository_cloudformation_stack.outbox.outputs["SweeperFunctionName"]
}

output "alarm_topic_arn" {
  value = aws_serverlessapplicationrepository_cloudformation_stack.outbox.outputs["AlarmTopicArn"]
}

# DashboardName exists only with Dashboard=true (not passed here): not read.
