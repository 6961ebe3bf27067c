import { EVENT_CATALOG } from "../domain/webhooks/event-catalog.ts";

/*
 * The OpenAPI 3.1 `webhooks` section: one entry per event type, the request reftrail sends to an endpoint. The body
 * schemas are the event catalog's (GET /v1/event-types), inlined: a receiver's tooling reads each entry alone.
 */

const HEADERS = [
  {
    name: "webhook-id",
    description: "The delivery's id: the same on every retry and re-send of the delivery; deduplicate by it",
  },
  { name: "webhook-timestamp", description: "Seconds since the Unix epoch when this attempt was signed" },
  {
    name: "webhook-signature",
    description:
      "Standard Webhooks signatures of `webhook-id.webhook-timestamp.body`: `v1,<base64 HMAC-SHA256>` with the " +
      "`whsec_` secret, or `v1a,<base64 Ed25519>` for an endpoint signing with ed25519; space-separated when a " +
      "rotated secret or key still signs beside the new one",
  },
].map(({ name, description }) => ({ name, in: "header", required: true, description, schema: { type: "string" } }));

/** `on` + the type in camel case: `reference_created` -> `onReferenceCreated`. */
function operationIdOf(type: string): string {
  return `on${type.replace(/(^|_)([a-z])/g, (_match, _underscore, letter: string) => letter.toUpperCase())}`;
}

export function openApiWebhooks(): Record<string, object> {
  return Object.fromEntries(
    EVENT_CATALOG.map(({ type, description, schema }) => [
      type,
      {
        post: {
          tags: ["webhooks"],
          operationId: operationIdOf(type),
          summary: `A ${type} event, POSTed to every enabled endpoint whose filters match it`,
          description,
          parameters: HEADERS,
          requestBody: { required: true, content: { "application/json": { schema } } },
          responses: {
            "2XX": { description: "Acknowledged. Any other answer, or none within the timeout, is retried" },
            "410": { description: "Gone: the endpoint is disabled and nothing more is sent to it" },
          },
        },
      },
    ]),
  );
}
