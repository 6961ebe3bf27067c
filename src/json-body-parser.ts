import type { FastifyInstance } from "fastify";
import { markUnderflowedNumbers } from "./domain/shared/underflow-scanner.ts";

/**
 * Fastify's own JSON body parser (same prototype-poisoning refusals), followed by one look at the text for numbers
 * that underflowed to 0 (`1e-400`): the parsed body carries NaN in their place, which the input guards of REST
 * (rest/input-guards.ts) and GraphQL (the variables guard) refuse as INEXACT_NUMBER with a pointer. The parsed
 * value alone cannot tell `1e-400` from `0`, so this is the one place that can see it.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    void parseJson(request, text, (error, parsed) => {
      if (error) done(error);
      else done(null, markUnderflowedNumbers(text, parsed));
    });
  });
}
