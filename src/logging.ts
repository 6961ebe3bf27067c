import { LogController, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from "fastify";
import type { Config } from "./config.ts";

/*
 * The server's log, in the format LOG_FORMAT chooses (config.ts): `json` keeps pino's records as they are (one
 * object per line, Fastify's "incoming request" and "request completed" records), for a log collector; `pretty`
 * prints each record as one readable line through pino-pretty, and one line per request, for a person at a
 * terminal.
 */

const REDACT = { paths: ["req.headers.authorization", 'req.headers["x-api-key"]'], censor: "[redacted]" };

/** One line per answered request ("GET /v1/tags 200 3.1 ms") instead of Fastify's two records. */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    const line = `${request.method} ${request.url} ${reply.statusCode} ${reply.elapsedTime.toFixed(1)} ms`;
    if (error) reply.log.error({ err: error }, line);
    else reply.log.info(line);
  }
}

/** Fastify's `logger` and `logController` options for `config`. */
export async function loggerOptions(config: Config): Promise<Pick<FastifyServerOptions, "logger" | "logController">> {
  if (config.logFormat === "json") return { logger: { level: config.logLevel, redact: REDACT } };
  // Loaded only for a terminal: a JSON log never pays for it.
  const { default: pretty } = await import("pino-pretty");
  const stream = pretty({
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname,reqId",
    singleLine: true,
    sync: true,
  });
  return {
    logger: { level: config.logLevel, redact: REDACT, stream },
    logController: new OneLinePerRequest(),
  };
}
