// What native consumers see: one operation of the official AWS SQS or Azure
// Service Bus JavaScript SDK, driven by e2e/consumers_test.go.
//
//   node consumers.mjs OP 'JSON'     (prints one JSON document on stdout)
//
//   sqs-send     {queueUrl, body, attributes: {name: {DataType, StringValue | BinaryValue (base64)}}}
//   sqs-receive  {queueUrl, count, waitSeconds}  → [{Body, MessageAttributes, Attributes}]
//   sb-send      {queue, message: {body, messageId, correlationId, subject, contentType, applicationProperties}}
//   sb-receive   {queue, count, waitMs}          → [{body, messageId, correlationId, subject, contentType,
//                                                   applicationProperties: {name: {js, value}}}]
//   sb-resend    {from, to, count, waitMs}       receives and sends each message on as the SDK received it
//
// SQS: SQS_ENDPOINT, AWS_REGION and static credentials from the environment.
// Service Bus: SB_CONNECTION_STRING. "js" is what the application holds:
// typeof, or Date / Buffer.
import { SQSClient, SendMessageCommand, ReceiveMessageCommand, DeleteMessageCommand } from "@aws-sdk/client-sqs";
import { ServiceBusClient } from "@azure/service-bus";

const [op, arg] = process.argv.slice(2);
const a = JSON.parse(arg ?? "{}");

function sqs() {
  return new SQSClient({
    endpoint: process.env.SQS_ENDPOINT,
    region: process.env.AWS_REGION ?? "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
}

function describe(v) {
  if (v instanceof Date) return { js: "Date", value: v.toISOString() };
  if (Buffer.isBuffer(v)) return { js: "Buffer", value: v.toString("base64") };
  if (ArrayBuffer.isView(v)) return { js: v.constructor.name, value: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
  if (v === null) return { js: "null", value: null };
  if (typeof v === "bigint") return { js: "bigint", value: v.toString() };
  return { js: typeof v, value: v };
}

function sbView(m) {
  const props = {};
  for (const [k, v] of Object.entries(m.applicationProperties ?? {})) props[k] = describe(v);
  const body = Buffer.isBuffer(m.body) ? m.body.toString("utf8") : m.body;
  return {
    body, messageId: m.messageId, correlationId: m.correlationId, subject: m.subject,
    contentType: m.contentType, sessionId: m.sessionId, applicationProperties: props,
  };
}

async function sbReceive(client, queue, count, waitMs) {
  const r = client.createReceiver(queue);
  const out = [];
  const deadline = Date.now() + waitMs;
  while (out.length < count && Date.now() < deadline) {
    const ms = await r.receiveMessages(count - out.length, { maxWaitTimeInMs: Math.max(100, Math.min(2000, deadline - Date.now())) });
    for (const m of ms) {
      await r.completeMessage(m);
      out.push(m);
    }
  }
  await r.close();
  return out;
}

async function main() {
  switch (op) {
    case "sqs-send": {
      const attrs = {};
      for (const [k, v] of Object.entries(a.attributes ?? {})) {
        attrs[k] = v.BinaryValue !== undefined
          ? { DataType: v.DataType, BinaryValue: Buffer.from(v.BinaryValue, "base64") }
          : { DataType: v.DataType, StringValue: v.StringValue };
      }
      const out = await sqs().send(new SendMessageCommand({ QueueUrl: a.queueUrl, MessageBody: a.body, MessageAttributes: attrs }));
      return { MessageId: out.MessageId };
    }
    case "sqs-receive": {
      const c = sqs();
      const out = [];
      const deadline = Date.now() + (a.waitSeconds ?? 20) * 1000;
      while (out.length < a.count && Date.now() < deadline) {
        const r = await c.send(new ReceiveMessageCommand({
          QueueUrl: a.queueUrl, MaxNumberOfMessages: Math.min(10, a.count - out.length), WaitTimeSeconds: 1,
          MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"],
        }));
        for (const m of r.Messages ?? []) {
          await c.send(new DeleteMessageCommand({ QueueUrl: a.queueUrl, ReceiptHandle: m.ReceiptHandle }));
          const attrs = {};
          for (const [k, v] of Object.entries(m.MessageAttributes ?? {})) {
            attrs[k] = { DataType: v.DataType };
            if (v.StringValue !== undefined) attrs[k].StringValue = v.StringValue;
            if (v.BinaryValue !== undefined) attrs[k].BinaryValue = Buffer.from(v.BinaryValue).toString("base64");
          }
          out.push({ Body: m.Body, MessageAttributes: attrs, Attributes: m.Attributes ?? {} });
        }
      }
      return out;
    }
    case "sb-send": {
      const client = new ServiceBusClient(process.env.SB_CONNECTION_STRING);
      const s = client.createSender(a.queue);
      const m = { ...a.message };
      for (const [k, v] of Object.entries(m.applicationProperties ?? {})) {
        if (v && typeof v === "object" && v.date) m.applicationProperties[k] = new Date(v.date);
      }
      await s.sendMessages(m);
      await s.close();
      await client.close();
      return { sent: 1 };
    }
    case "sb-receive": {
      const client = new ServiceBusClient(process.env.SB_CONNECTION_STRING);
      const ms = await sbReceive(client, a.queue, a.count, a.waitMs ?? 20000);
      await client.close();
      return ms.map(sbView);
    }
    case "sb-resend": {
      const client = new ServiceBusClient(process.env.SB_CONNECTION_STRING);
      const ms = await sbReceive(client, a.from, a.count, a.waitMs ?? 20000);
      const s = client.createSender(a.to);
      for (const m of ms) await s.sendMessages(m);
      await s.close();
      await client.close();
      return ms.map(sbView);
    }
  }
  throw new Error(`unknown operation ${op}`);
}

main().then(
  (r) => { process.stdout.write(JSON.stringify(r) + "\n"); },
  (e) => { console.error(e?.stack ?? String(e)); process.exit(1); },
);
