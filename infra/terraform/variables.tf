variable "application_id" {
  description = "The application's ARN in the Serverless Application Repository (the release notes give it)."
  type        = string
}

variable "semantic_version" {
  description = "The application version to deploy (a release of CHANGELOG.md)."
  type        = string
  default     = "0.1.0"
}

variable "table_name" {
  description = "The table to create for the orders and their outbox items."
  type        = string
  default     = "orders"
}

variable "bus_name" {
  description = "The EventBridge bus the events go to."
  type        = string
  default     = "orders"
}

variable "alarm_email" {
  description = "Where the stack's alarms are mailed (empty: no subscription)."
  type        = string
  default     = ""
}
