import type { FastifyInstance } from "fastify";
import { findJsonInputIssue, findTextIssue, MAX_JSON_DEPTH } from "../domain/shared/json-input.ts";
import { jsonPointer, problem, queryParameterProblem, sendProblem, type Problem } from "./problem.ts";

interface QuerySchema {
  readonly properties?: Readonly<Record<string, { readonly type?: unknown }>>;
}

/** A query-string integer as people write one: decimal digits only (no `1e2`, ` 5`, `5.0`, `0x10`, `+5`). */
const DECIMAL_INTEGER = /^[0-9]{1,15}$/;

/**
 * Checks every /v1 request's input once, before the route schemas and the services see it:
 * - bodies: well-formed Unicode without NUL in every string and at most MAX_JSON_DEPTH levels of nesting (422
 *   with a pointer; `domain/shared/json-input.ts` says why);
 * - query parameters the route does not take: 400 naming the parameter. Ignored, a misspelt one would change
 *   nothing and look like it worked (`after=` on a route that pages with `cursor` gives the first page forever);
 * - every query parameter's value: the same text rule (400 naming the parameter), whatever the route does with it;
 * - integer query parameters (those the route schema types as `integer`): decimal digits only. The query
 *   validator coerces text to numbers with `Number()`, which would otherwise read `1e2` as 100 and `0x10` as 16.
 */
export function registerInputGuards(app: FastifyInstance): void {
  app.addHook("preValidation", async (request, reply) => {
    if (!request.url.startsWith("/v1/")) return;

    const querySchema = request.routeOptions.schema?.querystring as QuerySchema | undefined;
    const query = request.query as Record<string, unknown> | undefined;
    const known = Object.keys(querySchema?.properties ?? {});
    for (const name of Object.keys(query ?? {})) {
      // No route: the answer is the 404, whatever the query string says.
      if (!known.includes(name) && !request.is404) return sendProblem(reply, unknownQueryParameterProblem(name, known));
    }
    for (const [name, raw] of Object.entries(query ?? {})) {
      for (const value of Array.isArray(raw) ? raw : [raw]) {
        const issue = typeof value === "string" ? findTextIssue(value) : null;
        if (issue) return sendProblem(reply, queryParameterProblem(name, issue.message));
      }
    }
    for (const [name, property] of Object.entries(querySchema?.properties ?? {})) {
      const raw = query?.[name];
      if (property.type !== "integer" || raw === undefined) continue;
      if (typeof raw !== "string" || !DECIMAL_INTEGER.test(raw)) {
        return sendProblem(reply, queryParameterProblem(name, "must be an integer written in decimal digits"));
      }
    }

    if (request.body === undefined) return;
    const issue = findJsonInputIssue(request.body);
    if (!issue) return;
    const pointer = jsonPointer(issue.path);
    return sendProblem(
      reply,
      problem(422, "VALIDATION_FAILED", `${pointer || "body"}: ${issue.message}`, {
        errors: [{ pointer, code: issue.code, message: issue.message }],
        ...(issue.code === "TOO_DEEP" && { limit: MAX_JSON_DEPTH }),
      }),
    );
  });
}

/** What a caller who sent one paging parameter on a route that takes the other meant. */
const SAME_MEANING: Readonly<Record<string, string>> = { after: "cursor", cursor: "after" };

/** 400 INVALID_QUERY_PARAMETER for a parameter the route does not take, listing the ones it does. */
function unknownQueryParameterProblem(name: string, known: readonly string[]): Problem {
  const meant = SAME_MEANING[name];
  const takes = known.length > 0 ? `this route takes ${known.join(", ")}` : "this route takes no query parameters";
  const message = `is not a query parameter of this route (${takes}${meant && known.includes(meant) ? `; to page, use ${meant}` : ""})`;
  return problem(400, "INVALID_QUERY_PARAMETER", `query parameter ${name} ${message}`, {
    errors: [{ pointer: name, code: "UNKNOWN_QUERY_PARAMETER", message }],
  });
}
