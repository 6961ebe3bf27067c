-- The throttle as a rate, not a window (SPEC §9.3, issue 50.2; docs/decisions/0100-webhook-throttle-gcra.md): a
-- throttled endpoint's deliveries are scheduled with GCRA. "theoretical_arrival_us" is the endpoint's theoretical
-- arrival time (microseconds since the epoch): the earliest instant its next delivery may start. The claim that
-- leases its deliveries gives them slots from there, one emission interval apart, and moves it past the last.
-- One row per throttled endpoint, written with the setting (an unthrottled endpoint has none). The counted window
-- of migration 0019 is gone.
DROP TABLE "webhook_endpoint_throttles";
CREATE TABLE "webhook_endpoint_throttles" (
    "endpoint_id" TEXT NOT NULL PRIMARY KEY,
    "theoretical_arrival_us" BIGINT NOT NULL,
    CONSTRAINT "webhook_endpoint_throttles_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "webhook_endpoint_throttles" ("endpoint_id", "theoretical_arrival_us")
SELECT "id", 0 FROM "webhook_endpoints" WHERE "max_deliveries_per_second" IS NOT NULL;

-- Why a delivery was dropped unsent (SPEC §9.2, issue 50.3): the worker decides, just before a delivery starts, with
-- its endpoint as it is then; 'endpoint_disabled' or 'filter_excluded' (the endpoint's event types or tags no
-- longer take the event). NULL for every delivery that was not dropped; a re-send, recovery or replay clears it.
ALTER TABLE "webhook_deliveries" ADD COLUMN "dropped_reason" TEXT;
