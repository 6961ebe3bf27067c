import { ROOT_CONTEXT, type Context, type ContextManager } from "@opentelemetry/api";
import { promiseHooks } from "node:v8";

/*
 * The trace context, carried across awaits by V8's promise hooks rather than by AsyncLocalStorage
 * (docs/decisions.md, "Traces"). Written here because no package does this: OpenTelemetry's own managers are
 * AsyncLocalStorage and async_hooks, and on Node 20 AsyncLocalStorage tracks every async resource of the process
 * through async_hooks (an async id, a resource lookup and a propagation loop per promise). Measured on the bench's
 * GraphQL reference on SQLite, with no span recorded: AsyncLocalStorage alone +11 to +18 % of the server's CPU per
 * request, these hooks +4 %. Node 22's AsyncContextFrame makes AsyncLocalStorage cheap; on Node 20 it is not.
 *
 * How: a promise created while a context is active keeps it (one property), and a promise's reactions (a `then`
 * callback, the code after an `await`) run with the context their promise kept. So a context flows along every
 * chain of promises and async functions, which is how every request of this server runs, and `with` makes one
 * active for a synchronous call, as the API asks.
 *
 * What it does not carry, unlike AsyncLocalStorage: callbacks queued outside promises (`setImmediate`,
 * `process.nextTick`, timers, event emitters) run with no context (the root). Where a request's work goes through
 * one of those, the code binds its callback (`context.bind`): the GraphQL loaders' batches
 * (src/graphql/loaders.ts), and the request's hooks after body parsing (src/tracing/http-spans.ts). Work shared by
 * the requests of a turn (the API keys' lookup, the budget's settlement) is of no single request: its statements
 * are traces of their own.
 */

const KEPT = Symbol("reftrail.traceContext");

type Kept = Promise<unknown> & { [KEPT]?: Context };

export class PromiseContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;
  /** The contexts that reactions running now replaced, innermost last (a reaction may run inside another's `with`). */
  private readonly replaced: Context[] = [];
  private stopHooks: (() => void) | undefined;

  active(): Context {
    return this.current;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const previous = this.current;
    this.current = context;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = previous;
    }
  }

  bind<T>(context: Context, target: T): T {
    if (typeof target !== "function") return target;
    const manager = this;
    const bound = function (this: unknown, ...args: unknown[]): unknown {
      return manager.with(context, target as (...args: unknown[]) => unknown, this, ...args);
    };
    return bound as T;
  }

  enable(): this {
    if (this.stopHooks) return this;
    // A promise made with no context active keeps nothing: the background's promises are left as V8 made them.
    this.stopHooks = promiseHooks.createHook({
      init: (promise) => {
        if (this.current !== ROOT_CONTEXT) (promise as Kept)[KEPT] = this.current;
      },
      before: (promise) => {
        this.replaced.push(this.current);
        this.current = (promise as Kept)[KEPT] ?? ROOT_CONTEXT;
      },
      after: () => {
        this.current = this.replaced.pop() ?? ROOT_CONTEXT;
      },
    }) as () => void;
    return this;
  }

  disable(): this {
    this.stopHooks?.();
    this.stopHooks = undefined;
    this.current = ROOT_CONTEXT;
    this.replaced.length = 0;
    return this;
  }
}
