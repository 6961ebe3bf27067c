import type { FastifyInstance } from "fastify";
import type { IngestionItemInput, IngestionItemResult } from "../../domain/references/ingestion-service.ts";
import { INGESTION_ITEM_KINDS, INGESTION_MODES } from "../../domain/references/ingestion-service.ts";
import type { Services } from "../../domain/services.ts";
import { callerOf } from "../rest-api.ts";
import { fromDomainError } from "../problem.ts";
import { BODY_PROBLEMS, problems, success } from "../response-schemas.ts";
import { deactivateReasonSchema, idempotencyKeyHeader } from "../schemas.ts";
import { serializeEvent, serializeUpdate } from "../serializers.ts";

interface IngestionItemBody {
  kind: string;
  reference_id: string;
  status?: string;
  error?: { code?: string; message?: string };
  update?: Record<string, unknown>;
  reason?: string;
}

/**
 * Shape only, like the single-item routes whose fields it repeats (the same schemas, so a malformed field gets the
 * same code here as there); which fields a kind takes, what they mean, and the 500-item limit are the service's.
 */
const ingestionItemSchema = {
  type: "object",
  description:
    "One report about one reference. `kind` says which: `extraction` takes `status` (and `error` when failed), " +
    "`update` takes the `update` document, `deactivate` takes a `reason`, `reactivate` takes nothing more.",
  properties: {
    kind: { type: "string", enum: [...INGESTION_ITEM_KINDS] },
    reference_id: { type: "string", description: "The reference the report is about" },
    status: { type: "string", enum: ["succeeded", "failed"], description: "extraction: the outcome" },
    error: {
      type: "object",
      description: "extraction, failed only: why (non-empty code and message)",
      properties: {
        code: { type: "string", description: "A short machine-readable code chosen by the tracking side" },
        message: { type: "string", description: "A human-readable explanation" },
      },
      additionalProperties: false,
    },
    update: {
      type: "object",
      description: "update: any JSON object; estimated_departure / estimated_arrival are recognized",
      properties: {
        estimated_departure: {
          type: ["string", "null"],
          description: "ISO 8601 date-time with offset, years 0001–9999 in UTC",
        },
        estimated_arrival: {
          type: ["string", "null"],
          description: "ISO 8601 date-time with offset, years 0001–9999 in UTC",
        },
      },
      additionalProperties: true,
    },
    reason: { ...deactivateReasonSchema, description: "deactivate: why" },
  },
  required: ["kind", "reference_id"],
  additionalProperties: false,
} as const;

function toItemInput(item: IngestionItemBody): IngestionItemInput {
  return {
    kind: item.kind,
    referenceId: item.reference_id,
    status: item.status,
    error: item.error,
    update: item.update,
    reason: item.reason,
  };
}

function serializeItemResult(result: IngestionItemResult) {
  if (!result.ok) {
    const { status, code, detail, errors } = fromDomainError(result.error);
    return {
      index: result.index,
      ok: false,
      reference_id: result.referenceId,
      events: [],
      update: null,
      error: { status, code, detail, errors: errors ?? [] },
    };
  }
  return {
    index: result.index,
    ok: true,
    reference_id: result.referenceId,
    events: result.events.map(serializeEvent),
    update: result.update && serializeUpdate(result.update),
    error: null,
  };
}

export function registerIngestionRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Body: { mode?: string; items: IngestionItemBody[] } }>(
    "/ingestions",
    {
      schema: {
        tags: ["lifecycle"],
        operationId: "ingest",
        summary:
          "Bulk ingestion (tracking side): 1 to 500 extraction outcomes, updates, deactivations and reactivations " +
          "for many references, in one transaction. mode atomic (default): one bad item rejects the request with " +
          "a pointer to it (/items/17/error/code) and nothing is saved; 201 when all were saved. mode per_item: " +
          "each item is judged on its own, the good ones are saved; 200 with a result per item.",
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
          properties: {
            mode: {
              type: "string",
              enum: [...INGESTION_MODES],
              default: "atomic",
              description: "atomic: all or nothing; per_item: a result per item, valid items saved",
            },
            items: {
              type: "array",
              items: ingestionItemSchema,
              description: "1 to 500 items, applied in order (items about one reference see each other's effects)",
            },
          },
          required: ["items"],
          additionalProperties: false,
        },
        response: {
          200: success("per_item mode: a result per item; valid items were saved", "IngestionResult", {
            replayable: true,
          }),
          201: success("atomic mode: every item was saved", "IngestionResult", { replayable: true }),
          ...problems(...BODY_PROBLEMS, 404, 409),
        },
      },
    },
    async (request, reply) => {
      const result = await services.ingestion.ingest(callerOf(request).organizationId, {
        mode: request.body.mode,
        items: request.body.items.map(toItemInput),
      });
      return reply.code(result.mode === "atomic" ? 201 : 200).send({
        mode: result.mode,
        succeeded: result.succeeded,
        failed: result.failed,
        event_count: result.eventCount,
        items: result.items.map(serializeItemResult),
      });
    },
  );
}
