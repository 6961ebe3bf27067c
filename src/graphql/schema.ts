import { readFileSync } from "node:fs";
import { makeExecutableSchema } from "@graphql-tools/schema";
import type { GraphQLFieldResolver, GraphQLScalarType, GraphQLSchema } from "graphql";
import { API_KEY_SCOPES } from "../domain/organizations/api-key-scopes.ts";
import type { Resolvers } from "./__generated__/resolvers-types.ts";
import type { GraphqlContext } from "./context.ts";
import {
  DEACTIVATE_REASON_NAMES,
  EXTRACTION_STATUS_NAMES,
  INGESTION_MODE_NAMES,
  LIFECYCLE_EVENT_TYPE_NAMES,
  TAG_MATCH_NAMES,
  WEBHOOK_DELIVERY_STATUS_NAMES,
  WEBHOOK_EVENT_TYPE_NAMES,
  WEBHOOK_TAG_FILTER_STATE_NAMES,
  WEBHOOK_DROPPED_REASON_NAMES,
  WEBHOOK_HELD_BACK_REASON_NAMES,
  WEBHOOK_ORDERING_NAMES,
  WEBHOOK_SIGNING_NAMES,
  WEBHOOK_REPLAY_RUN_STATE_NAMES,
} from "./enums.ts";
import { AT_ARGUMENTS, toGraphqlError, underArgument, type InputLocator } from "../pipeline/errors/graphql-errors.ts";
import { apiKeyResolvers } from "./resolvers/api-keys.resolvers.ts";
import { ingestionInputLocators, ingestionResolvers } from "./resolvers/ingestion.resolvers.ts";
import { lifecycleInputLocators, lifecycleResolvers } from "./resolvers/lifecycle.resolvers.ts";
import { nodeResolvers } from "./resolvers/nodes.resolvers.ts";
import { webhookInputLocators, webhookResolvers } from "./resolvers/webhooks.resolvers.ts";
import { referenceInputLocators, referenceResolvers } from "./resolvers/references.resolvers.ts";
import { tagInputLocators, tagResolvers } from "./resolvers/tags.resolvers.ts";
import { trustedDocumentInputLocators, trustedDocumentResolvers } from "./resolvers/trusted-documents.resolvers.ts";
import { subscriptionResolvers } from "./resolvers/subscription.resolvers.ts";
import { guardSchemaWithScopes } from "./scope-guard.ts";
import { DateTimeScalar, JSONObjectScalar, JSONScalar } from "./scalars.ts";

/** schema.graphql at the repository root: the contract, read as is. */
export const SCHEMA_FILE = new URL("../../schema.graphql", import.meta.url);

/**
 * A scalar's behaviour without its name and description: graphql-tools copies every property of a
 * GraphQLScalarType over the SDL's scalar, which would replace schema.graphql's descriptions.
 */
function scalarBehaviour(scalar: GraphQLScalarType) {
  return { __serialize: scalar.serialize, __parseValue: scalar.parseValue, __parseLiteral: scalar.parseLiteral };
}

const scalarResolvers = {
  DateTime: scalarBehaviour(DateTimeScalar),
  JSON: scalarBehaviour(JSONScalar),
  JSONObject: scalarBehaviour(JSONObjectScalar),
};

const enumResolvers: Resolvers = {
  // REFERENCES_READ stands for references:read, and so on.
  ApiKeyScope: Object.fromEntries(
    API_KEY_SCOPES.map((scope) => [scope.replace(":", "_").toUpperCase(), scope]),
  ) as Resolvers["ApiKeyScope"],
  DeactivateReason: DEACTIVATE_REASON_NAMES,
  ExtractionStatus: EXTRACTION_STATUS_NAMES,
  IngestionMode: INGESTION_MODE_NAMES,
  LifecycleEventType: LIFECYCLE_EVENT_TYPE_NAMES,
  TagMatch: TAG_MATCH_NAMES,
  WebhookDeliveryStatus: WEBHOOK_DELIVERY_STATUS_NAMES,
  WebhookEventType: WEBHOOK_EVENT_TYPE_NAMES,
  WebhookTagFilterState: WEBHOOK_TAG_FILTER_STATE_NAMES,
  WebhookOrdering: WEBHOOK_ORDERING_NAMES,
  WebhookSigning: WEBHOOK_SIGNING_NAMES,
  WebhookHeldBackReason: WEBHOOK_HELD_BACK_REASON_NAMES,
  WebhookDroppedReason: WEBHOOK_DROPPED_REASON_NAMES,
  WebhookReplayRunState: WEBHOOK_REPLAY_RUN_STATE_NAMES,
};

const INPUT_LOCATORS: Readonly<Record<string, InputLocator>> = {
  ...tagInputLocators,
  ...referenceInputLocators,
  ...lifecycleInputLocators,
  ...ingestionInputLocators,
  ...webhookInputLocators,
  ...trustedDocumentInputLocators,
  "Mutation.revokeApiKey": AT_ARGUMENTS,
};

/** A mutation's service input is its `input` argument, unless INPUT_LOCATORS says otherwise. */
const MUTATION_INPUT = underArgument(["input"]);

type AnyResolver = GraphQLFieldResolver<unknown, GraphqlContext, Record<string, unknown>>;

/**
 * Wraps every field resolver once, at startup, for what all of them share:
 * - a DomainError becomes a coded GraphQL error whose `extensions.field` points into this field's arguments;
 * - a mutation first empties the request's loaders, so that its payload (and a later mutation of the same
 *   operation) never shows what was loaded before the change.
 * Only plain resolver functions are wrapped; anything else (such as a future subscription's
 * `{ subscribe, resolve }`) is passed through as it is.
 */
function withSharedBehaviour(resolvers: Resolvers): Resolvers {
  const wrapType = (typeName: string, fields: Record<string, unknown>) =>
    Object.fromEntries(
      Object.entries(fields).map(([fieldName, resolve]) => {
        // `__resolveType` and the like are type resolvers, not field resolvers: they take no arguments.
        if (typeof resolve !== "function" || fieldName.startsWith("__")) return [fieldName, resolve];
        const locate =
          INPUT_LOCATORS[`${typeName}.${fieldName}`] ?? (typeName === "Mutation" ? MUTATION_INPUT : AT_ARGUMENTS);
        const isMutation = typeName === "Mutation";
        const resolver: AnyResolver = async (parent, args, context, info) => {
          if (isMutation) context.loaders.clearAll();
          try {
            return await (resolve as AnyResolver)(parent, args, context, info);
          } catch (error) {
            throw toGraphqlError(error, locate, args);
          }
        };
        return [fieldName, resolver];
      }),
    );
  return Object.fromEntries(
    Object.entries(resolvers).map(([typeName, fields]) => [
      typeName,
      wrapType(typeName, fields as Record<string, unknown>),
    ]),
  ) as Resolvers;
}

function mergeResolvers(parts: readonly Resolvers[]): Resolvers {
  const merged: Record<string, Record<string, unknown>> = {};
  for (const part of parts) {
    for (const [typeName, fields] of Object.entries(part)) {
      const existing = merged[typeName];
      if (existing && (typeof fields !== "object" || fields === null))
        throw new Error(`resolvers for ${typeName} defined twice`);
      for (const fieldName of Object.keys(fields as object)) {
        if (existing && fieldName in existing) throw new Error(`resolver ${typeName}.${fieldName} defined twice`);
      }
      merged[typeName] = existing ? { ...existing, ...(fields as object) } : (fields as Record<string, unknown>);
    }
  }
  return merged as Resolvers;
}

/**
 * The executable schema: schema.graphql with the resolvers of every domain. Shared by GraphQL over HTTP and
 * (later) graphql-ws, so that both run the same resolvers, errors and limits.
 */
export function buildGraphqlSchema(): GraphQLSchema {
  const resolvers = withSharedBehaviour(
    mergeResolvers([
      tagResolvers,
      referenceResolvers,
      lifecycleResolvers,
      ingestionResolvers,
      subscriptionResolvers,
      webhookResolvers,
      nodeResolvers,
      trustedDocumentResolvers,
      apiKeyResolvers,
    ]),
  );
  // The key's scopes are checked per root field, by one wrapper over the executable schema (scope-guard.ts).
  return guardSchemaWithScopes(
    makeExecutableSchema({
      typeDefs: readFileSync(SCHEMA_FILE, "utf8"),
      resolvers: [scalarResolvers, enumResolvers, resolvers],
      resolverValidationOptions: { requireResolversToMatchSchema: "error" },
    }),
  );
}
