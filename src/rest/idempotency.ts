import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../domain/shared/clock.ts";
import { IDEMPOTENCY_REPLAY_WINDOW_MS, type IdempotencyStore } from "../domain/idempotency/idempotency-store.ts";
import { DomainError } from "../domain/shared/errors.ts";

/*
 * `Idempotency-Key` on POST, following the IETF httpapi draft: the same key with the same body within
 * 24 hours replays the first response; the same key with another body is 422; a key whose first request is
 * still running is 409. The key is claimed with an insert before the handler runs, so two concurrent requests
 * cannot both create an object. A 5xx releases the key so that the client can retry. The store keeps responses
 * encrypted (a webhook endpoint's creation or rotation answers with its signing secret) and prunes them after
 * the window.
 */

const MAX_KEY_LENGTH = 255;

declare module "fastify" {
  interface FastifyRequest {
    idempotencyKey?: string;
  }
}

export function registerIdempotency(app: FastifyInstance, store: IdempotencyStore, clock: Clock): void {
  app.addHook("preHandler", async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers["idempotency-key"];
    if (request.method !== "POST" || typeof header !== "string" || !request.caller) return;
    const key = header.trim();
    if (key === "" || key.length > MAX_KEY_LENGTH) {
      throw new DomainError("VALIDATION_FAILED", `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, [
        { path: ["Idempotency-Key"], code: "INVALID_HEADER", message: "invalid Idempotency-Key" },
      ]);
    }
    const organizationId = request.caller.organizationId;
    const requestHash = createHash("sha256")
      .update(`${request.method} ${request.url}\n${JSON.stringify(request.body ?? null)}`)
      .digest("hex");

    for (let attempt = 0; attempt < 2; attempt++) {
      const existing = await store.find(organizationId, key);
      if (existing && clock.now().getTime() - existing.createdAt.getTime() > IDEMPOTENCY_REPLAY_WINDOW_MS) {
        await store.release(organizationId, key);
        continue;
      }
      if (existing) {
        if (existing.requestHash !== requestHash) {
          throw new DomainError("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request");
        }
        if (existing.statusCode === null || existing.responseBody === null) {
          throw new DomainError(
            "IDEMPOTENCY_KEY_IN_USE",
            "A request with this Idempotency-Key is still being processed",
          );
        }
        return reply
          .code(existing.statusCode)
          .header("idempotent-replayed", "true")
          .type("application/json; charset=utf-8")
          .send(existing.responseBody);
      }
      if (await store.claim(organizationId, key, requestHash)) {
        request.idempotencyKey = key;
        return;
      }
    }
    throw new DomainError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still being processed");
  });

  app.addHook("onSend", async (request, reply, payload) => {
    const key = request.idempotencyKey;
    if (!key || !request.caller) return payload;
    if (reply.statusCode >= 500 || typeof payload !== "string") {
      await store.release(request.caller.organizationId, key);
    } else {
      await store.complete(request.caller.organizationId, key, reply.statusCode, payload);
    }
    return payload;
  });
}
