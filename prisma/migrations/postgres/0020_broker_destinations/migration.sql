-- Broker destinations (SPEC §9.3): an endpoint that publishes to a RabbitMQ exchange or a NATS JetStream subject
-- instead of calling an HTTP URL. One encrypted envelope (src/store/secret-cipher.ts) of the destination's JSON,
-- since its URL may hold the broker's credentials; null for an HTTP endpoint. The "url" column of such an endpoint
-- holds the broker URL with its password masked.
ALTER TABLE "webhook_endpoints" ADD COLUMN "destination" TEXT;
