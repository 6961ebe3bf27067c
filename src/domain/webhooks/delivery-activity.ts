import { DomainError } from "../shared/errors.ts";
import type { WebhookDeliveryWithAttempts } from "./webhook-models.ts";
import type { WebhookService } from "./webhook-service.ts";

/*
 * Live delivery activity (the operator page's `Subscription.webhookDeliveryAttempts`). Glossary:
 * - delivery change: a delivery got an attempt recorded, or was queued by hand (test event, re-send);
 * - change signals: how changes reach every instance (in-process on SQLite, LISTEN/NOTIFY on PostgreSQL;
 *   src/store/signals/delivery-signals.ts). A signal only names the delivery: subscribers read it from the database, so
 *   what they show is what was committed.
 * Signals are a wake-up, not a log: one lost while an instance reconnects delays nothing but that refresh.
 */

/** Names a delivery that changed. */
export interface DeliveryChange {
  readonly organizationId: string;
  readonly endpointId: string;
  readonly deliveryId: string;
}

export type DeliveryChangeListener = (change: DeliveryChange) => void;

export interface DeliveryChangeSignals {
  /** Tells every subscriber, on every instance, that these deliveries changed (call after the commit). */
  publish(changes: readonly DeliveryChange[]): void;
  onChange(listener: DeliveryChangeListener): () => void;
  close(): Promise<void>;
}

/** The most changed deliveries a subscription holds while its client reads slowly; older ones are dropped. */
const MAX_WAITING_CHANGES = 500;

/** Opens one stream of delivery changes per subscription. */
export class DeliveryActivityService {
  private streams = 0;

  constructor(
    private readonly signals: DeliveryChangeSignals,
    private readonly webhooks: WebhookService,
  ) {}

  /** Streams open now: each sees every change from the moment `open` returned it (a gauge on `/metrics`). */
  openStreams(): number {
    return this.streams;
  }

  /**
   * The organization's deliveries (of one endpoint when `endpointId` is given) as they change, each read
   * with its attempts after the change committed. Changes that arrive while one is being read are merged.
   * @throws NOT_FOUND when `endpointId` is not an endpoint of the organization.
   */
  async open(
    organizationId: string,
    endpointId: string | null,
  ): Promise<AsyncIterableIterator<WebhookDeliveryWithAttempts>> {
    const endpoint = endpointId === null ? null : await this.webhooks.getEndpoint(organizationId, endpointId);
    const waiting = new Set<string>();
    let wake: (() => void) | undefined;
    let closed = false;
    const stop = this.signals.onChange((change) => {
      if (change.organizationId !== organizationId) return;
      if (endpoint && change.endpointId !== endpoint.id) return;
      waiting.delete(change.deliveryId);
      waiting.add(change.deliveryId);
      if (waiting.size > MAX_WAITING_CHANGES) waiting.delete(waiting.values().next().value!);
      wake?.();
    });
    this.streams++;
    const finish = async (): Promise<IteratorResult<WebhookDeliveryWithAttempts>> => {
      if (!closed) this.streams--;
      closed = true;
      stop();
      wake?.();
      return { done: true, value: undefined };
    };
    const webhooks = this.webhooks;
    const iterator: AsyncIterableIterator<WebhookDeliveryWithAttempts> = {
      [Symbol.asyncIterator]: () => iterator,
      async next(): Promise<IteratorResult<WebhookDeliveryWithAttempts>> {
        for (;;) {
          if (closed) return { done: true, value: undefined };
          const deliveryId = waiting.values().next().value;
          if (deliveryId === undefined) {
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
            continue;
          }
          waiting.delete(deliveryId);
          try {
            return { done: false, value: await webhooks.getDelivery(organizationId, null, deliveryId) };
          } catch (error) {
            // Deleted with its endpoint since the change: nothing to show.
            if (error instanceof DomainError && error.code === "NOT_FOUND") continue;
            throw error;
          }
        }
      },
      return: finish,
      throw: async (error: unknown) => {
        await finish();
        throw error;
      },
    };
    return iterator;
  }
}
