import { GraphQLError, Kind, parse } from "graphql";
import type { DocumentReader } from "../../domain/documents/trusted-document-service.ts";

/**
 * The registry's reader of document texts (a port of src/domain/documents/): graphql-js's parser. A document is
 * registered once and parsed per request by Apollo (or graphql-ws's preparation) as any other: this parse is the
 * registration's, to refuse a text that could never run and to keep the operation names for the listing.
 */
export const graphqlDocumentReader: DocumentReader = {
  operationNames(text) {
    let document;
    try {
      document = parse(text, { noLocation: true });
    } catch (error) {
      // A document nested past the parser's stack fails with a RangeError: not a syntax error, but no document.
      return { problem: error instanceof GraphQLError ? error.message : "it could not be parsed" };
    }
    const names: (string | null)[] = [];
    for (const definition of document.definitions) {
      if (definition.kind === Kind.OPERATION_DEFINITION) names.push(definition.name?.value ?? null);
      else if (definition.kind !== Kind.FRAGMENT_DEFINITION)
        return { problem: "it holds type system definitions; register operations and fragments only" };
    }
    if (names.length === 0) return { problem: "it holds no operation" };
    return { names };
  },
};
