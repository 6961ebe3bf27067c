import { afterEach, describe, expect, it } from "@jest/globals";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { OUTCOME_LOST } from "../src/domain/webhooks/webhook-attempt-log.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * An instance that stops lets its requests in flight finish for a short grace, then aborts the rest: the
 * connection is dropped, and the delivery is handed back with its attempt counted as one whose outcome is lost (the
 * request may have reached the endpoint), instead of the stop waiting for the whole webhook timeout.
 */

/** A receiver that takes requests and never answers; tells when the first arrives and when its connection closes. */
async function silentReceiver() {
  let arrived!: () => void;
  let closed!: () => void;
  const firstArrived = new Promise<void>((resolve) => (arrived = resolve));
  const firstClosed = new Promise<void>((resolve) => (closed = resolve));
  const server: Server = createServer((request: IncomingMessage) => {
    request.socket.once("close", closed);
    request.resume();
    arrived();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/silent`,
    firstArrived,
    firstClosed,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.each(DATABASE_KINDS)("a stopping instance's requests in flight (%s)", (kind) => {
  let owner: TestServer | undefined;
  let sender: TestServer | undefined;
  let receiver: Awaited<ReturnType<typeof silentReceiver>> | undefined;
  afterEach(async () => {
    await sender?.close();
    await owner?.close();
    await receiver?.close();
    sender = owner = receiver = undefined;
  });

  it("are aborted once the grace ends, and their deliveries handed back with an attempt whose outcome is lost", async () => {
    receiver = await silentReceiver();
    // The database's owner serves the API only; the other instance sends, with a timeout far beyond the grace.
    owner = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
    sender = await startInstanceOn(owner, { env: { WEBHOOK_TIMEOUT: "60s", WEBHOOK_LEASE: "61s" } });
    const { webhooks } = owner.app.services;
    const { endpoint } = await webhooks.createEndpoint(owner.organizationId, { url: receiver.url });
    const queued = await webhooks.sendTestEvent(owner.organizationId, endpoint.id);
    await receiver.firstArrived;

    const stopping = sender;
    sender = undefined;
    await stopping.close();
    await receiver.firstClosed;

    const delivery = await webhooks.getDelivery(owner.organizationId, endpoint.id, queued.id);
    expect(delivery).toMatchObject({ status: "pending", attemptCount: 1, leaseOwner: null });
    expect(delivery.attempts).toMatchObject([{ statusCode: null, error: OUTCOME_LOST }]);
  });
});
