// Only `prisma dev` (Prisma's local development database) loads this module; reftrail never runs it.
export function startLocalDurableStreamsServer() {
  throw new Error("`prisma dev` is not available in reftrail: @prisma/streams-local is replaced by a stand-in");
}
