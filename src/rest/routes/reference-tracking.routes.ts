import type { FastifyInstance } from "fastify";
import type { Services } from "../../domain/services.ts";
import { callerOf } from "../rest-api.ts";
import { BODY_PROBLEMS, problems, success } from "../response-schemas.ts";
import { deactivateReasonSchema, idempotencyKeyHeader, pageQuery, uuidParam } from "../schemas.ts";
import { serializeUpdate } from "../serializers.ts";
import { serializeOneReference, serializeReferences } from "./reference-listing.ts";

const tags = ["references"];
const referenceIdParam = uuidParam("referenceId", "Reference id");

/**
 * What the tracking side reports about a reference (deactivation, reactivation, extraction outcomes, update
 * documents, child containers), and the stored updates.
 */
export function registerReferenceTrackingRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Params: { referenceId: string }; Body: { reason: string } }>(
    "/references/:referenceId/deactivate",
    {
      schema: {
        tags,
        operationId: "deactivateReference",
        summary: "Deactivate with a reason (no-op when already deactivated)",
        params: referenceIdParam,
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
          properties: { reason: deactivateReasonSchema },
          required: ["reason"],
          additionalProperties: false,
        },
        response: {
          200: success("The deactivated reference", "Reference", { replayable: true }),
          ...problems(...BODY_PROBLEMS, 404, 409),
        },
      },
    },
    async (request) => {
      const reference = await services.referenceTracking.deactivate(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.body.reason,
      );
      return serializeOneReference(services, reference);
    },
  );

  app.post<{ Params: { referenceId: string } }>(
    "/references/:referenceId/reactivate",
    {
      schema: {
        tags,
        operationId: "reactivateReference",
        summary: "Reactivate a deactivated reference (409 when active)",
        params: referenceIdParam,
        headers: idempotencyKeyHeader,
        response: {
          200: success("The reactivated reference", "Reference", { replayable: true }),
          ...problems(404, 409, 422),
        },
      },
    },
    async (request) => {
      const reference = await services.referenceTracking.reactivate(
        callerOf(request).organizationId,
        request.params.referenceId,
      );
      return serializeOneReference(services, reference);
    },
  );

  app.post<{
    Params: { referenceId: string };
    Body: { status: "succeeded" } | { status: "failed"; error: { code: string; message: string } };
  }>(
    "/references/:referenceId/extractions",
    {
      schema: {
        tags,
        operationId: "recordExtraction",
        summary:
          "Record an extraction outcome (tracking side). The outcome is an event of the reference's log, not a " +
          "resource of its own: the response is the reference, without Location",
        params: referenceIdParam,
        headers: idempotencyKeyHeader,
        // Shape only; what the outcome means (error required when failed and only then, non-empty code and
        // message) is judged by the service, with the same codes and messages as over GraphQL.
        body: {
          type: "object",
          description:
            '`{ "status": "succeeded" }` or `{ "status": "failed", "error": { "code": ..., "message": ... } }`; ' +
            "the error is required when the status is failed and refused otherwise; its code and message must " +
            "not be empty or blank (422 VALIDATION_FAILED with a pointer otherwise).",
          properties: {
            status: { type: "string", enum: ["succeeded", "failed"] },
            error: {
              type: "object",
              properties: {
                code: { type: "string", description: "A short machine-readable code chosen by the tracking side" },
                message: { type: "string", description: "A human-readable explanation" },
              },
              additionalProperties: false,
            },
          },
          required: ["status"],
          additionalProperties: false,
        },
        response: {
          201: success("The reference after the outcome", "Reference", { replayable: true }),
          ...problems(...BODY_PROBLEMS, 404, 409),
        },
      },
    },
    async (request, reply) => {
      const reference = await services.referenceTracking.recordExtraction(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.body,
      );
      return reply.code(201).send(await serializeOneReference(services, reference));
    },
  );

  app.post<{ Params: { referenceId: string }; Body: Record<string, unknown> }>(
    "/references/:referenceId/updates",
    {
      schema: {
        tags,
        operationId: "recordReferenceUpdate",
        summary: "Record a reference update; estimated_departure / estimated_arrival are recognized",
        description:
          "The document is stored as sent. A number JSON cannot keep exactly (beyond a double, such as 1e400, or " +
          "an integer beyond ±9007199254740991) is refused: 422 VALIDATION_FAILED, issue INEXACT_NUMBER, with a " +
          "pointer to it. Send such values as strings.",
        params: referenceIdParam,
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
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
        response: {
          201: success("The stored update", "ReferenceUpdate", { location: true, replayable: true }),
          ...problems(...BODY_PROBLEMS, 404, 409),
        },
      },
      config: {
        locationOf: (update: { id: string; reference_id: string }) =>
          `/v1/references/${update.reference_id}/updates/${update.id}`,
      },
    },
    async (request, reply) => {
      const update = await services.referenceTracking.recordUpdate(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.body,
      );
      return reply.code(201).send(serializeUpdate(update));
    },
  );

  app.get<{ Params: { referenceId: string }; Querystring: { limit: number; cursor?: string } }>(
    "/references/:referenceId/updates",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "listReferenceUpdates",
        summary: "Stored updates, newest first",
        params: referenceIdParam,
        querystring: { type: "object", properties: pageQuery },
        response: { 200: success("A page of updates", "ReferenceUpdatePage"), ...problems(400, 404) },
      },
    },
    async (request) => {
      const page = await services.referenceTracking.listUpdates(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.query.limit,
        request.query.cursor,
      );
      return { data: page.items.map(serializeUpdate), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { referenceId: string; updateId: string } }>(
    "/references/:referenceId/updates/:updateId",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "getReferenceUpdate",
        summary: "Read one stored update (the Location of its creation)",
        params: {
          type: "object",
          properties: {
            referenceId: { type: "string", description: "Reference id" },
            updateId: { type: "string", description: "Update id" },
          },
          required: ["referenceId", "updateId"],
        },
        response: { 200: success("The update", "ReferenceUpdate"), ...problems(404) },
      },
    },
    async (request) =>
      serializeUpdate(
        await services.referenceTracking.getUpdate(
          callerOf(request).organizationId,
          request.params.referenceId,
          request.params.updateId,
        ),
      ),
  );

  app.post<{ Params: { referenceId: string }; Body: { container_ids: string[] } }>(
    "/references/:referenceId/children",
    {
      schema: {
        tags,
        operationId: "reportChildContainers",
        summary: "Report containers found on a bill of lading / booking; new ones become child references",
        params: referenceIdParam,
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
          properties: {
            container_ids: {
              type: "array",
              items: { type: "string" },
              description: "1 to 500 container numbers (ISO 6346)",
            },
          },
          required: ["container_ids"],
          additionalProperties: false,
        },
        response: {
          200: success("Every child reported, new or existing", "ReferenceList", { replayable: true }),
          ...problems(...BODY_PROBLEMS, 404, 409),
        },
      },
    },
    async (request) => {
      const children = await services.references.reportChildren(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.body.container_ids,
      );
      return { data: await serializeReferences(services, children) };
    },
  );
}
