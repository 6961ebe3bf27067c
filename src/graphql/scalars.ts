import { formatDateTime, parseDateTime } from "../domain/shared/date-time.ts";
import { GraphQLError, GraphQLScalarType, Kind } from "graphql";

export { GraphQLJSON as JSONScalar, GraphQLJSONObject as JSONObjectScalar } from "graphql-scalars";

const DATE_TIME_RULE = "an ISO 8601 date-time with an offset, such as 2026-11-22T02:49:01.665Z";

function parseInput(value: unknown): Date {
  const date = parseDateTime(value);
  if (!date) throw new GraphQLError(`DateTime must be ${DATE_TIME_RULE}; got ${JSON.stringify(value)}`);
  return date;
}

/**
 * Time: output is always UTC with milliseconds; input must carry an offset (the same rule as the
 * REST API, through the domain's parser).
 */
export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  name: "DateTime",
  serialize(value) {
    if (value instanceof Date && !Number.isNaN(value.getTime())) return formatDateTime(value);
    throw new GraphQLError(`DateTime cannot represent ${String(value)}`);
  },
  parseValue: parseInput,
  parseLiteral(ast) {
    if (ast.kind !== Kind.STRING)
      throw new GraphQLError(`DateTime must be a string: ${DATE_TIME_RULE}`, { nodes: ast });
    return parseInput(ast.value);
  },
});
