import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "@jest/globals";
import { NATS_URL, RABBITMQ_URL } from "./support/brokers.ts";

/*
 * The broker clients (amqplib, @nats-io/*) are loaded only once a delivery of their kind goes out: a server with
 * HTTP endpoints only never loads them. Checked in a process of its own (the built router of dist/, as `npm start`
 * runs it), whose CommonJS module cache says what was loaded.
 */

const run = promisify(execFile);

const SCRIPT = `
import { createRequire } from "node:module";
import { createServer } from "node:http";
const { DestinationRouter } = await import("./dist/webhooks/destinations/destination-router.js");
const { WebhookSender } = await import("./dist/webhooks/webhook-sender.js");
const { AddressGuard } = await import("./dist/webhooks/address-guard.js");
const cache = createRequire(import.meta.url).cache;
const loaded = () => ({
  amqplib: Object.keys(cache).some((path) => path.includes("/node_modules/amqplib/")),
  nats: Object.keys(cache).some((path) => path.includes("/node_modules/@nats-io/")),
});
const server = createServer((request, response) => request.resume().on("end", () => response.end()));
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const guard = new AddressGuard(["127.0.0.0/8"]);
const router = new DestinationRouter(new WebhookSender({ guard, timeoutMs: 3000, connectionsPerOrigin: 2 }), {
  guard,
  timeoutMs: 3000,
});
const delivery = (destination) => ({
  destination, webhookId: "msg_1", eventType: "webhook_test", body: "{}", secrets: [], timestamp: new Date(),
});
const steps = {};
const http = await router.send(delivery({ kind: "http", url: "http://127.0.0.1:" + server.address().port + "/" }));
steps.http = { status: http.statusCode, ...loaded() };
// Neither exchange nor stream exists: the attempts fail, but the clients are loaded for them.
await router.send(delivery({ kind: "rabbitmq", url: process.argv[1], exchange: "reftrail-loading-none", routingKey: null }));
steps.rabbitmq = loaded();
await router.send(delivery({ kind: "nats", url: process.argv[2], subject: "reftrail.loading.none" }));
steps.nats = loaded();
await router.close();
server.close();
console.log(JSON.stringify(steps));
`;

describe("broker client loading", () => {
  it("loads amqplib and @nats-io only when a delivery of their kind goes out", async () => {
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", SCRIPT, RABBITMQ_URL, NATS_URL], {
      cwd: process.cwd(),
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toEqual({
      http: { status: 200, amqplib: false, nats: false },
      rabbitmq: { amqplib: true, nats: false },
      nats: { amqplib: true, nats: true },
    });
  });
});
