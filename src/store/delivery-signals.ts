import pg from "pg";
import type {
  DeliveryChange,
  DeliveryChangeListener,
  DeliveryChangeSignals,
} from "../domain/webhooks/delivery-activity.ts";
import type { Database } from "./database.ts";
import type { NotifierLog } from "./event-notifier.ts";

/*
 * Delivery change signals (src/domain/webhooks/delivery-activity.ts) for the operator page's subscription.
 * Kept apart from the lifecycle commit signals (event-notifier.ts) on purpose: a separate channel and connection,
 * so that either can change without the other.
 *
 * - SQLite: one process owns the database, so signals stay in the process.
 * - PostgreSQL: each instance LISTENs on `reftrail_webhook_deliveries` over its own connection and NOTIFYs there
 *   after a change committed; the payload names the delivery, and subscribers read it from the database.
 */

export const DELIVERY_CHANNEL = "reftrail_webhook_deliveries";
const RECONNECT_DELAY_MS = 1_000;

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
    const payloads = changes.map((change) =>
      JSON.stringify({ o: change.organizationId, e: change.endpointId, d: change.deliveryId }),
    );
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
    const client = new pg.Client({ connectionString: this.url, application_name: "reftrail-delivery-signals" });
    client.on("notification", (message) => {
      // Our own NOTIFY comes back too; local listeners were told by publish().
      const own = (client as pg.Client & { processID?: number }).processID;
      if (message.processId === own || message.channel !== DELIVERY_CHANNEL || !message.payload) return;
      const change = parsePayload(message.payload);
      if (change) this.emit(change);
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

function parsePayload(text: string): DeliveryChange | null {
  try {
    const payload = JSON.parse(text) as { o?: unknown; e?: unknown; d?: unknown };
    if (typeof payload.o !== "string" || typeof payload.e !== "string" || typeof payload.d !== "string") return null;
    return { organizationId: payload.o, endpointId: payload.e, deliveryId: payload.d };
  } catch {
    return null;
  }
}
