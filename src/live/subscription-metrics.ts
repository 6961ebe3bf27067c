import { Counter, Gauge, type Registry } from "prom-client";
import type { DeliveryActivityService } from "../domain/webhooks/delivery-activity.ts";
import type { LiveSubscriptions } from "./live-subscriptions.ts";

/** The live runtime's gauges on `/metrics`: connections, open subscriptions, buffered events, slow clients. */
export function registerSubscriptionMetrics(
  registry: Registry | undefined,
  {
    sessions,
    subscriptions,
    deliveryActivity,
  }: {
    sessions: ReadonlyMap<unknown, unknown>;
    subscriptions: LiveSubscriptions;
    deliveryActivity?: DeliveryActivityService;
  },
): void {
  if (!registry) return;
  if (deliveryActivity) {
    new Gauge({
      name: "reftrail_delivery_activity_subscriptions_open",
      help: "Open webhookDeliveryAttempts subscriptions (the operator page's live feed)",
      registers: [registry],
      collect() {
        this.set(deliveryActivity.openStreams());
      },
    });
  }
  new Gauge({
    name: "reftrail_graphql_ws_connections",
    help: "Open graphql-ws connections",
    registers: [registry],
    collect() {
      this.set(sessions.size);
    },
  });
  new Gauge({
    name: "reftrail_subscriptions_open",
    help: "Open lifecycleEvents subscriptions",
    registers: [registry],
    collect() {
      this.set(subscriptions.stats().open);
    },
  });
  new Gauge({
    name: "reftrail_subscription_buffered_events",
    help: "Lifecycle events held for subscribers that have not read them yet (bounded per subscription)",
    registers: [registry],
    collect() {
      this.set(subscriptions.stats().bufferedEvents);
    },
  });
  new Counter({
    name: "reftrail_subscription_fell_behind_total",
    help: "Times a subscription's queue overflowed (slow client) and it fell back to reading the log",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(subscriptions.stats().fellBehind);
    },
  });
}
