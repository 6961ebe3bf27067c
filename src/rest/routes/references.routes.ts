import type { FastifyInstance } from "fastify";
import type { Services } from "../../domain/services.ts";
import { callerOf } from "../rest-api.ts";
import { BODY_PROBLEMS, noContent, problems, success } from "../response-schemas.ts";
import { idempotencyKeyHeader, tagsArraySchema, uuidParam } from "../schemas.ts";
import { serializeTagRef } from "../serializers.ts";
import {
  listReferencesQuerySchema,
  sendReferencePage,
  serializeOneReference,
  toListReferencesInput,
  type ListReferencesQuery,
} from "./reference-listing.ts";

const tags = ["references"];
const referenceIdParam = uuidParam("referenceId", "Reference id");

/** References themselves: create, list, read, delete, and the tags on one (reports: reference-tracking.routes.ts). */
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
    async (request, reply) =>
      sendReferencePage(reply, services, callerOf(request).organizationId, toListReferencesInput(request.query)),
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
      const reference = await services.referenceTracking.deactivate(
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
          properties: {
            referenceId: { type: "string", description: "Reference id" },
            tagId: { type: "string", description: "Id of the tag to remove from the reference" },
          },
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
}
