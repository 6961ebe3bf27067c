import { unwrapResolverError } from "@apollo/server/errors";
import type { GraphQLError, GraphQLFormattedError } from "graphql";
import { formatGraphqlError, isInternalParseFailure, isUnexpectedError } from "./graphql-errors.ts";

export const SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE";
export const SERVICE_UNAVAILABLE_MESSAGE = "The service cannot reach its database; retry shortly";

/** The logger of the request or connection an error belongs to. */
export interface ErrorLog {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/**
 * The one path a GraphQL error takes to a client, over HTTP (Apollo's `formatError` and a plugin,
 * graphql-server.ts) and over WebSocket (graphql-ws's hooks, src/graphql/subscription-server.ts): what the client
 * sees, and what the server logs.
 */
export interface GraphqlErrorMasking {
  /**
   * The client's view of `error`: coded errors pass, a DomainError is converted, a database outage is
   * SERVICE_UNAVAILABLE, anything else is masked as INTERNAL_SERVER_ERROR.
   */
  format(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
  /** Logs each error {@link format} masks, with its path and operation; an unparsable document is a warning. */
  logUnexpected(log: ErrorLog, errors: readonly GraphQLError[], operationName: string | null | undefined): void;
}

/** @param isServiceUnavailable recognizes an error that means the database is unreachable right now. */
export function createGraphqlErrorMasking(isServiceUnavailable: (error: unknown) => boolean): GraphqlErrorMasking {
  return {
    format: (formatted, error) =>
      isServiceUnavailable(unwrapResolverError(error))
        ? {
            message: SERVICE_UNAVAILABLE_MESSAGE,
            ...(formatted.path && { path: formatted.path }),
            extensions: { code: SERVICE_UNAVAILABLE },
          }
        : formatGraphqlError(formatted, error),
    logUnexpected(log, errors, operationName) {
      for (const error of errors) {
        if (isInternalParseFailure(error)) {
          log.warn({ err: error.originalError ?? error }, "GraphQL document could not be parsed");
          continue;
        }
        if (!isUnexpectedError(error)) continue;
        log.error(
          { err: unwrapResolverError(error), path: error.path, operationName },
          "GraphQL operation failed unexpectedly",
        );
      }
    },
  };
}
