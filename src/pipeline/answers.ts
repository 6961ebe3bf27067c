import { HeaderMap } from "@apollo/server";
import { GraphQLError } from "graphql";
import type { PublishedCost } from "./budget/published-cost.ts";
import { SERVICE_UNAVAILABLE, SERVICE_UNAVAILABLE_MESSAGE } from "./errors/error-masking.ts";

/* What the pipeline's stages answer before or instead of execution (graphql-pipeline.ts). */

/** An answer decided before execution, with what the transport must say beside it over HTTP. */
export interface EarlyAnswer {
  readonly status: number;
  readonly retryAfterSeconds: number;
  readonly error: GraphQLError;
  /** The cost it publishes (`extensions.cost`), when the budget could be read. */
  readonly cost: PublishedCost | null;
}

/** An answer as bytes (a read cache hit), for the transport to send. */
export interface BytesAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly contentType: string;
  readonly body: Buffer | string;
}

/** Seconds a client is asked to wait (`Retry-After`) when the database is unavailable. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/** SERVICE_UNAVAILABLE, HTTP 503 with Retry-After (Apollo reads `extensions.http`). */
export function serviceUnavailable(): GraphQLError {
  return new GraphQLError(SERVICE_UNAVAILABLE_MESSAGE, {
    extensions: {
      code: SERVICE_UNAVAILABLE,
      http: { status: 503, headers: new HeaderMap([["retry-after", String(UNAVAILABLE_RETRY_AFTER_SECONDS)]]) },
    },
  });
}
