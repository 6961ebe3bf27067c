import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import type { DeliveryChange, DeliveryChangeSignals } from "../src/domain/webhooks/delivery-activity.ts";
import { openDatabase, type Database } from "../src/store/database.ts";
import { DELIVERY_CHANNEL, openDeliveryChangeSignals } from "../src/store/signals/delivery-signals.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { createTestDatabase, type TestDatabase } from "./support/test-server.ts";

/*
 * Delivery change signals across instances on PostgreSQL (docs/decisions.md, "Webhooks"): a batch of changes
 * published by one instance reaches every other instance whole, in as few notifications as fit it.
 */

/**
 * A channel of the test's own: PostgreSQL delivers notifications in commit order, whatever their channel, so
 * once the bystander hears a marker sent after the batch, it has heard everything the batch sent.
 */
const MARKER_CHANNEL = "reftrail_test_marker";

const silent = { info: () => {}, warn: () => {}, error: () => {} };

function changes(count: number): DeliveryChange[] {
  const id = (kind: string, index: number) => `0190b3c5-${kind}-7000-8000-${String(index).padStart(12, "0")}`;
  return Array.from({ length: count }, (_, index) => ({
    organizationId: id("0000", 1),
    endpointId: id("1111", index % 10),
    deliveryId: id("2222", index),
  }));
}

describe("delivery change signals on postgres", () => {
  let testDatabase: TestDatabase;
  let database: Database;
  const signals: DeliveryChangeSignals[] = [];
  let listener: pg.Client;
  const payloads: string[] = [];
  let markers = 0;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("postgres");
    database = await openDatabase(testDatabase.url);
    // Two instances' signals, each on its own connection, and a bystander that counts what goes over the channel.
    for (let index = 0; index < 2; index++) signals.push(await openDeliveryChangeSignals(database, silent));
    listener = new pg.Client({ connectionString: testDatabase.url });
    await listener.connect();
    listener.on("notification", (message) => {
      if (message.channel === MARKER_CHANNEL) markers++;
      else payloads.push(message.payload ?? "");
    });
    await listener.query(`LISTEN ${DELIVERY_CHANNEL}`);
    await listener.query(`LISTEN ${MARKER_CHANNEL}`);
  });
  afterAll(async () => {
    await listener?.end();
    for (const signal of signals) await signal.close();
    await database?.close();
    await testDatabase?.drop();
  });

  it("carries a batch of 300 changes to the other instance in a few notifications, each under the 8,000-byte limit", async () => {
    const [sender, receiver] = signals as [DeliveryChangeSignals, DeliveryChangeSignals];
    const received: DeliveryChange[] = [];
    const stop = receiver.onChange((change) => received.push(change));
    try {
      const batch = changes(300);
      sender.publish(batch);
      await expectEventually(
        () => received.length,
        (count) => expect(count).toBe(300),
        { timeoutMs: 5_000 },
      );
      expect(received).toEqual(batch);
      // Everything the batch sent reached the bystander before this marker.
      await listener.query(`NOTIFY ${MARKER_CHANNEL}`);
      await expectEventually(
        () => markers,
        (count) => expect(count).toBe(1),
      );
      expect(payloads.length).toBeGreaterThan(0);
      expect(payloads.length).toBeLessThanOrEqual(5);
      for (const payload of payloads) expect(Buffer.byteLength(payload)).toBeLessThan(8_000);
    } finally {
      stop();
    }
  });
});
