import type { FastifyInstance } from "fastify";
import type { Reference, TaggedReference } from "../../domain/models.ts";
import type { ListReferencesInput } from "../../domain/references/reference-service.ts";
import type { Services } from "../../domain/services.ts";
import { callerOf } from "../rest-api.ts";
import { BODY_PROBLEMS, noContent, problems, success } from "../response-schemas.ts";
import {
  deactivateReasonSchema,
  idempotencyKeyHeader,
  pageQuery,
  splitRepeatedValues,
  tagsArraySchema,
  uuidParam,
} from "../schemas.ts";
import { serializeReference, serializeTagRef, serializeUpdate } from "../serializers.ts";

const tags = ["references"];
const referenceIdParam = uuidParam("referenceId", "Reference id");

export interface ListReferencesQuery {
  limit: number;
  cursor?: string;
  tag_ids?: string[];
  tag_names?: string[];
  tag_match?: "all" | "any";
  exclude_tag_ids?: string[];
  exclude_tag_names?: string[];
  active?: boolean;
  carrier_code?: string;
  container_id?: string;
  bill_of_lading?: string;
  booking_number?: string;
  parent_reference_id?: string;
}

export const listReferencesQuerySchema = {
  type: "object",
  properties: {
    ...pageQuery,
    tag_ids: {
      type: "array",
      items: { type: "string" },
      description: "Tag ids; repeat the parameter (tag_ids=a&tag_ids=b) or separate with commas (tag_ids=a,b)",
    },
    tag_names: {
      type: "array",
      items: { type: "string" },
      description:
        "Tag names, matched case-insensitively; repeat the parameter for several (tag_names=a&tag_names=b). " +
        "Not split on commas: a name may contain one",
    },
    tag_match: {
      type: "string",
      enum: ["all", "any"],
      default: "all",
      description: "all: carries every listed tag; any: at least one",
    },
    exclude_tag_ids: {
      type: "array",
      items: { type: "string" },
      description:
        "Leave out references carrying any of these tags (unknown ids exclude nothing). Repeatable; " +
        "comma-separated lists are accepted too. Combines with tag_ids, tag_names and tag_match",
    },
    exclude_tag_names: {
      type: "array",
      items: { type: "string" },
      description:
        "Leave out references carrying any of the tags with these names, matched case-insensitively " +
        "(unknown names exclude nothing). Repeatable",
    },
    active: { type: "boolean" },
    carrier_code: { type: "string" },
    container_id: { type: "string" },
    bill_of_lading: { type: "string" },
    booking_number: { type: "string" },
    parent_reference_id: { type: "string" },
  },
} as const;

export function toListReferencesInput(query: ListReferencesQuery): ListReferencesInput {
  return {
    tagIds: splitRepeatedValues(query.tag_ids),
    tagNames: query.tag_names,
    tagMatch: query.tag_match,
    excludeTagIds: splitRepeatedValues(query.exclude_tag_ids),
    excludeTagNames: query.exclude_tag_names,
    active: query.active,
    carrierCode: query.carrier_code,
    containerId: query.container_id,
    billOfLading: query.bill_of_lading,
    bookingNumber: query.booking_number,
    parentReferenceId: query.parent_reference_id,
    limit: query.limit,
    cursor: query.cursor,
  };
}

/**
 * Serializes references with their tags: those the services read with them, or else loaded for the whole page
 * in one query.
 */
export async function serializeReferences(services: Services, references: readonly (Reference | TaggedReference)[]) {
  if (references.every((reference) => "tags" in reference)) {
    return references.map((reference) => serializeReference(reference, (reference as TaggedReference).tags));
  }
  const tagsByReference = await services.tags.tagsOfReferences(references.map((reference) => reference.id));
  return references.map((reference) => serializeReference(reference, tagsByReference.get(reference.id) ?? []));
}

export async function serializeOneReference(services: Services, reference: Reference | TaggedReference) {
  const [serialized] = await serializeReferences(services, [reference]);
  return serialized!;
}

export async function referencePage(services: Services, organizationId: string, input: ListReferencesInput) {
  const page = await services.references.listReferences(organizationId, input);
  return { data: await serializeReferences(services, page.items), next_cursor: page.nextCursor };
}

export function registerReferenceRoutes(app: FastifyInstance, services: Services): void {
  app.post<{
    Body: {
      container_id?: string;
      bill_of_lading?: string;
      booking_number?: string;
      carrier_code: string;
      tags?: unknown[];
    };
  }>(
    "/references",
    {
      schema: {
        tags,
        operationId: "createReference",
        summary: "Create a reference from exactly one of container_id, bill_of_lading, booking_number",
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
          properties: {
            container_id: { type: "string", description: "ISO 6346 container number (spaces removed, upper-cased)" },
            bill_of_lading: { type: "string" },
            booking_number: { type: "string" },
            carrier_code: { type: "string", description: "2-4 letter SCAC" },
            tags: tagsArraySchema,
          },
          required: ["carrier_code"],
          additionalProperties: false,
        },
        response: {
          201: success("The created reference", "ReferenceCreated", { location: true, replayable: true }),
          ...problems(...BODY_PROBLEMS),
        },
      },
      config: {
        locationOf: (body: { reference: { id: string } }) => `/v1/references/${body.reference.id}`,
      },
    },
    async (request, reply) => {
      const body = request.body;
      const reference = await services.references.createReference(callerOf(request).organizationId, {
        containerId: body.container_id,
        billOfLading: body.bill_of_lading,
        bookingNumber: body.booking_number,
        carrierCode: body.carrier_code,
        tags: body.tags,
      });
      return reply.code(201).send({
        message: "Reference created successfully.",
        reference: await serializeOneReference(services, reference),
      });
    },
  );

  app.get<{ Querystring: ListReferencesQuery }>(
    "/references",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "listReferences",
        summary: "List references, newest first, filtered",
        querystring: listReferencesQuerySchema,
        response: { 200: success("A page of references", "ReferencePage"), ...problems(400) },
      },
    },
    async (request) => referencePage(services, callerOf(request).organizationId, toListReferencesInput(request.query)),
  );

  app.get<{ Params: { referenceId: string } }>(
    "/references/:referenceId",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "getReference",
        summary: "Read a reference",
        params: referenceIdParam,
        response: { 200: success("The reference", "Reference"), ...problems(404) },
      },
    },
    async (request) =>
      serializeOneReference(
        services,
        await services.references.getReference(callerOf(request).organizationId, request.params.referenceId),
      ),
  );

  app.delete<{ Params: { referenceId: string } }>(
    "/references/:referenceId",
    {
      schema: {
        tags,
        operationId: "unsubscribeReference",
        summary: "Deactivate with reason customer_unsubscribed",
        params: referenceIdParam,
        response: { 200: success("The deactivated reference", "Reference"), ...problems(404) },
      },
    },
    async (request) => {
      const reference = await services.references.deactivate(
        callerOf(request).organizationId,
        request.params.referenceId,
        "customer_unsubscribed",
      );
      return serializeOneReference(services, reference);
    },
  );

  app.post<{ Params: { referenceId: string }; Body: { tags: unknown[] } }>(
    "/references/:referenceId/tags",
    {
      schema: {
        tags,
        operationId: "addReferenceTags",
        summary: "Add tags (idempotent)",
        params: referenceIdParam,
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
          properties: { tags: tagsArraySchema },
          required: ["tags"],
          additionalProperties: false,
        },
        response: {
          200: success("The reference's tags after the change", "ReferenceTags", { replayable: true }),
          ...problems(...BODY_PROBLEMS, 404, 409),
        },
      },
    },
    async (request) => {
      const result = await services.references.addTags(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.body.tags,
      );
      return { reference_id: request.params.referenceId.toLowerCase(), tags: result.map(serializeTagRef) };
    },
  );

  app.delete<{ Params: { referenceId: string; tagId: string } }>(
    "/references/:referenceId/tags/:tagId",
    {
      schema: {
        tags,
        operationId: "removeReferenceTag",
        summary: "Remove a tag from the reference (the tag remains); 204 also when it was not there",
        params: {
          type: "object",
          properties: { referenceId: { type: "string" }, tagId: { type: "string" } },
          required: ["referenceId", "tagId"],
        },
        response: { 204: noContent("Removed, or was not there"), ...problems(404) },
      },
    },
    async (request, reply) => {
      await services.references.removeTag(
        callerOf(request).organizationId,
        request.params.referenceId,
        request.params.tagId,
      );
      return reply.code(204).send();
    },
  );

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
      const reference = await services.references.deactivate(
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
      const reference = await services.references.reactivate(
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
      const reference = await services.references.recordExtraction(
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
      const update = await services.references.recordUpdate(
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
      const page = await services.references.listUpdates(
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
        await services.references.getUpdate(
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
