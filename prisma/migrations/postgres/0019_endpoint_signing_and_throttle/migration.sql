-- Receivers' choices (SPEC §9.3): how an endpoint signs, and how many deliveries it takes a second.
-- "signing": 'hmac-sha256' (a `whsec_` secret, `v1,` signatures) or 'ed25519' (a `whsk_` private key, `v1a,`
-- signatures). Either way the key sits, encrypted, in "secret" (and the keys rotated out in "previous_secret");
-- "public_key" is the ed25519 endpoint's `whpk_` key, readable by the API (NULL for HMAC).
ALTER TABLE "webhook_endpoints" ADD COLUMN "signing" TEXT NOT NULL DEFAULT 'hmac-sha256';
ALTER TABLE "webhook_endpoints" ADD COLUMN "public_key" TEXT;
-- NULL: no throttle. Otherwise the most deliveries the endpoint receives in one second, all instances together.
ALTER TABLE "webhook_endpoints" ADD COLUMN "max_deliveries_per_second" INTEGER;

-- A throttled endpoint's current one-second window: the claim that leases its deliveries counts them here, in
-- the same statement, and leases none beyond the endpoint's maximum (docs/decisions.md, "Webhook throttle").
-- One row per throttled endpoint, written with the setting (an unthrottled endpoint has none).
CREATE TABLE "webhook_endpoint_throttles" (
    "endpoint_id" TEXT NOT NULL,
    "window_second" BIGINT NOT NULL,
    "used" INTEGER NOT NULL,

    CONSTRAINT "webhook_endpoint_throttles_pkey" PRIMARY KEY ("endpoint_id")
);

ALTER TABLE "webhook_endpoint_throttles" ADD CONSTRAINT "webhook_endpoint_throttles_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;
