// Writes an order and its event in one DynamoDB transaction with the
// TypeScript writer package, as docs/adopt/write_order.py does in Python.
//
//   node examples/write-order.mjs --table T create ORDER_ID
//   node examples/write-order.mjs --table T pay ORDER_ID
//   node examples/write-order.mjs --table T poison ORDER_ID   (an envelope that is not JSON: tests only)
//
// The settings come from the stack's variables (OUTBOX_SHARDS, the key
// names, HOME_REGION, SINK...), as the stack's functions read them; the
// client from the usual AWS configuration (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB).

import { DynamoDBClient, GetItemCommand, TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb";
import { OutboxSettings, OutboxTransaction } from "../dist/src/index.js";

const [, , flag, table, command, orderId] = process.argv;
if (flag !== "--table" || !table || !["create", "pay", "poison"].includes(command) || !orderId) {
  console.error("usage: write-order.mjs --table TABLE create|pay|poison ORDER_ID");
  process.exit(2);
}
const client = new DynamoDBClient({});
const settings = OutboxSettings.fromVariables(table, process.env);
const { partitionKey: PK, sortKey: SK } = settings.keys;
const pk = `ORDER#${orderId}`;
const key = { [PK]: { S: pk }, [SK]: { S: "META" } };

if (command === "create") {
  const tx = new OutboxTransaction(settings)
    .put("order", {
      TableName: table,
      Item: { ...key, status: { S: "PENDING" }, version: { N: "1" } },
      ConditionExpression: "attribute_not_exists(#pk)",
      ExpressionAttributeNames: { "#pk": PK },
    })
    .event(pk, { eventType: "OrderCreated", aggregateType: "Order", aggregateId: orderId, aggregateVersion: 1, payload: { orderId, status: "PENDING", version: 1 } });
  console.log((await tx.send(client))[0]);
} else if (command === "pay") {
  const current = (await client.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item;
  if (!current) throw new Error(`no order ${orderId}`);
  const version = Number(current.version.N);
  // The event after the read the condition checks: its id is made now.
  const tx = new OutboxTransaction(settings)
    .update("order", {
      TableName: table,
      Key: key,
      UpdateExpression: "SET #s = :paid, #v = :next",
      ConditionExpression: "#v = :version AND #s = :pending",
      ExpressionAttributeNames: { "#s": "status", "#v": "version" },
      ExpressionAttributeValues: { ":paid": { S: "PAID" }, ":pending": { S: "PENDING" }, ":version": { N: String(version) }, ":next": { N: String(version + 1) } },
    })
    .event(pk, { eventType: "OrderPaid", aggregateType: "Order", aggregateId: orderId, aggregateVersion: version + 1, payload: { orderId, status: "PAID", version: version + 1 } });
  console.log((await tx.send(client))[0]);
} else {
  const tx = new OutboxTransaction(settings).event(pk, { eventType: "OrderCreated", aggregateType: "Order", aggregateId: orderId, aggregateVersion: 1, payload: {} });
  const items = tx.build();
  items[0].Put.Item.envelope = { S: "not json" };
  await client.send(new TransactWriteItemsCommand({ TransactItems: items }));
  console.log(tx.eventIds[0]);
}
