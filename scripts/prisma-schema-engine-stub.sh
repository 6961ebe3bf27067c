#!/bin/sh
# Stand-in for the Prisma schema engine; see scripts/prisma-generate.mjs.
exit 1
