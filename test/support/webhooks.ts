import type { Clock } from "../../src/domain/shared/clock.ts";
import { expectStatus, http } from "./http.ts";

/* Helpers shared by the webhook tests. */

/** An organization's view of a test server: its URL and API key. */
export interface Caller {
  readonly url: string;
  readonly apiKey: string;
}

/** Polls `check` every 20 ms until it returns a truthy value; fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
  what = "a condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function createEndpoint(
  caller: Caller,
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string } & Record<string, any>> {
  const created = await http(caller, "POST", "/v1/webhooks", { body });
  expectStatus(created, 201);
  return created.body;
}

export async function listDeliveries(caller: Caller, endpointId: string, query = ""): Promise<any[]> {
  const result = await http(caller, "GET", `/v1/webhooks/${endpointId}/deliveries${query}`);
  expectStatus(result, 200);
  return result.body.data;
}

export async function getDelivery(caller: Caller, endpointId: string, deliveryId: string): Promise<any> {
  const result = await http(caller, "GET", `/v1/webhooks/${endpointId}/deliveries/${deliveryId}`);
  expectStatus(result, 200);
  return result.body;
}

let serial = 0;
/** Creates a bill of lading reference (one `reference_created` event) and returns it. */
export async function createReference(caller: Caller, extra: Record<string, unknown> = {}): Promise<any> {
  serial += 1;
  const result = await http(caller, "POST", "/v1/references", {
    body: { bill_of_lading: `BL-HOOK-${process.pid}-${serial}`, carrier_code: "MAEU", ...extra },
  });
  expectStatus(result, 201);
  return result.body.reference;
}

/** The system time moved by an offset the test sets: webhook timestamps stay checkable until it moves. */
export class OffsetClock implements Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}
