import type pg from "pg";
import type {
  DeliveryChange,
  DeliveryChangeListener,
  DeliveryChangeSignals,
} from "../../domain/webhooks/delivery-activity.ts";
import type { Database } from "../database.ts";
import type { NotifierLog } from "./commit-signals.ts";

/*
 * Delivery change signals (src/domain/webhooks/delivery-activity.ts) for the operator page's subscription.
 * Kept apart from the lifecycle commit signals (commit-signals.ts) on purpose: a separate channel and connection,
 * so that either can change without the other.
 *
 * - SQLite: one process owns the database, so signals stay in the process.
 * - PostgreSQL: each instance LISTENs on `reftrail_webhook_deliveries` over its own connection and NOTIFYs there
 *   after a change committed; the payload names the deliveries, and subscribers read them from the database.
 *   A published batch (the worker records outcomes a few dozen at a time) goes out as few notifications as fit
 *   its changes, not one per delivery: every notification is queued at commit under PostgreSQL's one notify lock
 *   and read, parsed and dispatched by every listening instance, the sender's own included.
 */

export const DELIVERY_CHANNEL = "reftrail_webhook_deliveries";
const RECONNECT_DELAY_MS = 1_000;
/** PostgreSQL refuses a payload of 8,000 bytes or more; changes are packed into payloads below this. */
const MAX_PAYLOAD_BYTES = 7_900;

/** A change as it travels in a payload: `[organizationId, endpointId, deliveryId]`. */
type PackedChange = [string, string, string];

/** The changes as JSON arrays of packed changes, each under the payload limit (ids are ASCII: bytes = length). */
export function packChanges(changes: readonly DeliveryChange[]): string[] {
  const payloads: string[] = [];
  let packed: string[] = [];
  let length = 2;
  for (const change of changes) {
    const item = JSON.stringify([change.organizationId, change.endpointId, change.deliveryId]);
    if (packed.length > 0 && length + 1 + item.length > MAX_PAYLOAD_BYTES) {
      payloads.push(`[${packed.join(",")}]`);
      packed = [];
      length = 2;
    }
    packed.push(item);
    length += item.length + 1;
  }
  if (packed.length > 0) payloads.push(`[${packed.join(",")}]`);
  return payloads;
}

/** Signals for `database`: in-process on SQLite, LISTEN/NOTIFY on PostgreSQL. */
export async function openDeliveryChangeSignals(database: Database, log: NotifierLog): Promise<DeliveryChangeSignals> {
  const signals = new DeliverySignals(database.provider === "postgres" ? database.url : null, log);
  await signals.connect();
  return signals;
}

class DeliverySignals implements DeliveryChangeSignals {
  private readonly listeners = new Set<DeliveryChangeListener>();
  private client: pg.Client | undefined;
  private closed = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private sending: Promise<unknown> = Promise.resolve();

  /** @param url the PostgreSQL URL, or null for in-process signals only */
  constructor(
    private readonly url: string | null,
    private readonly log: NotifierLog,
  ) {}

  publish(changes: readonly DeliveryChange[]): void {
    for (const change of changes) this.emit(change);
    const client = this.client;
    if (!client || changes.length === 0) return;
    const payloads = packChanges(changes);
    // One statement per batch, one batch at a time on this connection.
    this.sending = this.sending
      .then(() =>
        client.query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload", [DELIVERY_CHANNEL, payloads]),
      )
      .catch((error: unknown) => this.log.warn({ err: error }, "sending delivery change notifications failed"));
  }

  onChange(listener: DeliveryChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.listeners.clear();
    await this.sending;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  async connect(): Promise<void> {
    if (this.url === null || this.closed) return;
    // Loaded here: a process on SQLite never needs the PostgreSQL driver. Closed meanwhile: nothing to open.
    const { default: pg } = await import("pg");
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, application_name: "reftrail-delivery-signals" });
    client.on("notification", (message) => {
      // Our own NOTIFY comes back too; local listeners were told by publish().
      const own = (client as pg.Client & { processID?: number }).processID;
      if (message.processId === own || message.channel !== DELIVERY_CHANNEL || !message.payload) return;
      for (const change of parsePayload(message.payload)) this.emit(change);
    });
    const lost = (error: unknown) => {
      if (this.client !== client || this.closed) return;
      this.client = undefined;
      client.end().catch(() => undefined);
      this.log.warn({ err: error }, "delivery change signals disconnected; reconnecting");
      this.reconnectTimer = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
      this.reconnectTimer.unref();
    };
    client.on("error", lost);
    client.on("end", () => lost(undefined));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${DELIVERY_CHANNEL}`);
    } catch (error) {
      lost(error);
    }
  }

  private emit(change: DeliveryChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (error) {
        this.log.error({ err: error }, "a delivery change listener failed");
      }
    }
  }
}

/** The changes of a payload: a list of packed changes, or one `{ o, e, d }` as instances before packing sent. */
function parsePayload(text: string): DeliveryChange[] {
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch {
    return [];
  }
  const items: unknown[] = Array.isArray(payload) ? payload : [payload];
  return items.flatMap((item): DeliveryChange[] => {
    if (Array.isArray(item) && item.length === 3 && item.every((part) => typeof part === "string")) {
      const [organizationId, endpointId, deliveryId] = item as PackedChange;
      return [{ organizationId, endpointId, deliveryId }];
    }
    const single = item as { o?: unknown; e?: unknown; d?: unknown } | null;
    if (typeof single?.o === "string" && typeof single.e === "string" && typeof single.d === "string")
      return [{ organizationId: single.o, endpointId: single.e, deliveryId: single.d }];
    return [];
  });
}
