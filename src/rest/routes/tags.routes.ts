import type { FastifyInstance } from "fastify";
import type { Services } from "../../domain/services.ts";
import { callerOf, changeOf } from "../rest-api.ts";
import { BODY_PROBLEMS, noContent, problems, success } from "../response-schemas.ts";
import { idempotencyKeyHeader, pageQuery, uuidParam } from "../schemas.ts";
import { serializeTag } from "../serializers.ts";
import {
  listReferencesQuerySchema,
  sendReferencePage,
  toListReferencesInput,
  type ListReferencesQuery,
} from "./reference-listing.ts";

const tags = ["tags"];
const nameBody = {
  type: "object",
  properties: {
    name: {
      type: "string",
      description: "1-100 characters after trimming and NFC normalization; unique case-insensitively",
    },
  },
  required: ["name"],
  additionalProperties: false,
} as const;

export function registerTagRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Body: { name: string } }>(
    "/tags",
    {
      schema: {
        tags,
        operationId: "createTag",
        summary: "Create a tag",
        headers: idempotencyKeyHeader,
        body: nameBody,
        response: {
          201: success("The created tag", "Tag", { location: true, replayable: true }),
          ...problems(...BODY_PROBLEMS, 409),
        },
      },
      config: { locationOf: (tag: { id: string }) => `/v1/tags/${tag.id}` },
    },
    async (request, reply) => {
      const tag = await services.tags.createTag(callerOf(request).organizationId, request.body.name);
      return reply.code(201).send(serializeTag(tag));
    },
  );

  app.get<{ Querystring: { name_prefix?: string; limit: number; cursor?: string } }>(
    "/tags",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "listTags",
        summary: "List tags in case-insensitive name order",
        querystring: {
          type: "object",
          properties: {
            name_prefix: {
              type: "string",
              description: "Only names starting with this (case-insensitive; every character literal, `%` and `_` too)",
            },
            ...pageQuery,
          },
        },
        response: { 200: success("A page of tags", "TagPage"), ...problems(400) },
      },
    },
    async (request) => {
      const page = await services.tags.listTags(callerOf(request).organizationId, {
        namePrefix: request.query.name_prefix,
        limit: request.query.limit,
        cursor: request.query.cursor,
      });
      return { data: page.items.map(serializeTag), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { tagId: string } }>(
    "/tags/:tagId",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "getTag",
        summary: "Read a tag",
        params: uuidParam("tagId", "Tag id"),
        response: { 200: success("The tag", "Tag"), ...problems(404) },
      },
    },
    async (request) => serializeTag(await services.tags.getTag(callerOf(request).organizationId, request.params.tagId)),
  );

  app.patch<{ Params: { tagId: string }; Body: { name: string } }>(
    "/tags/:tagId",
    {
      schema: {
        tags,
        operationId: "renameTag",
        summary: "Rename a tag",
        params: uuidParam("tagId", "Tag id"),
        body: nameBody,
        response: { 200: success("The renamed tag", "Tag"), ...problems(...BODY_PROBLEMS, 404, 409) },
      },
    },
    async (request) =>
      serializeTag(
        await services.tags.renameTag(callerOf(request).organizationId, request.params.tagId, request.body.name),
      ),
  );

  app.delete<{ Params: { tagId: string } }>(
    "/tags/:tagId",
    {
      schema: {
        tags,
        operationId: "deleteTag",
        summary: "Delete a tag and remove it from every reference",
        params: uuidParam("tagId", "Tag id"),
        response: { 204: noContent("Deleted"), ...problems(404) },
      },
    },
    async (request, reply) => {
      await services.tags.deleteTag(callerOf(request).organizationId, request.params.tagId, changeOf(request));
      return reply.code(204).send();
    },
  );

  app.get<{ Params: { tagId: string }; Querystring: ListReferencesQuery }>(
    "/tags/:tagId/references",
    {
      config: { readCache: true },
      schema: {
        tags,
        operationId: "listTagReferences",
        summary: "References carrying the tag, newest first (same filters as GET /references)",
        params: uuidParam("tagId", "Tag id"),
        querystring: listReferencesQuerySchema,
        response: { 200: success("A page of references", "ReferencePage"), ...problems(400, 404) },
      },
    },
    async (request, reply) => {
      const { organizationId } = callerOf(request);
      const tag = await services.tags.getTag(organizationId, request.params.tagId);
      const input = toListReferencesInput(request.query);
      return sendReferencePage(reply, services, organizationId, {
        ...input,
        tagIds: [...(input.tagIds ?? []), tag.id],
      });
    },
  );
}
