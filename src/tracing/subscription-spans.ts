import { ROOT_CONTEXT, SpanKind, type Tracer } from "@opentelemetry/api";
import { getOperationAST, type DocumentNode } from "graphql";
import { GRAPHQL_OPERATION_NAME, GRAPHQL_OPERATION_TYPE } from "./graphql-spans.ts";

/*
 * One span per subscription message sent (kind producer), over graphql-ws and Server-Sent Events alike, each
 * the root of a trace of its own: a subscription lives for hours, and one trace per stream would be one trace
 * that never ends. The span is made where the transport hands the message over for sending (its `onNext`).
 */

export const SUBSCRIPTION_TRANSPORT = "reftrail.subscription.transport";
/** graphql-ws: the operation's id on its connection. */
export const SUBSCRIPTION_OPERATION_ID = "reftrail.subscription.operation_id";

export type SubscriptionTransport = "graphql-ws" | "sse";

/** The operation a message answers, as the transport knows it; its name is read from the document. */
export interface MessageOperation {
  readonly document: DocumentNode;
  readonly operationName?: string | null;
}

export function traceSubscriptionMessage(
  tracer: Tracer,
  transport: SubscriptionTransport,
  operation: MessageOperation | null,
  operationId?: string,
): void {
  const operationName = operation
    ? getOperationAST(operation.document, operation.operationName)?.name?.value
    : undefined;
  tracer
    .startSpan(
      "subscription message",
      {
        kind: SpanKind.PRODUCER,
        root: true,
        attributes: {
          [SUBSCRIPTION_TRANSPORT]: transport,
          [GRAPHQL_OPERATION_TYPE]: "subscription",
          ...(operationName ? { [GRAPHQL_OPERATION_NAME]: operationName } : {}),
          ...(operationId !== undefined ? { [SUBSCRIPTION_OPERATION_ID]: operationId } : {}),
        },
      },
      ROOT_CONTEXT,
    )
    .end();
}
