/**
 * Which folder may import which (docs/architecture.md#the-direction-of-imports),
 * checked by dependencies.test.ts with dependency-cruiser over src/ and
 * adapters/. Folders import only downward, so the tree reads bottom-up and
 * each layer can be tested without the ones above it.
 */

/** Top to bottom: a layer imports its own and the ones below it, never one above. */
const LAYERS = [
  { name: 'cli', path: '^src/cli/' },
  { name: 'adapters', path: '^adapters/' },
  // cli-internal.ts (and cli-internal-redis.ts, which loads ioredis) sit with index.ts: entry points, for the CLI alone.
  { name: 'composition-root', path: '^src/(index|api|options|cli-internal|cli-internal-redis)\\.ts$' },
  // One request's layers. The pipeline runs the sequence; the routes answer, each with its OpenAPI text;
  // the openapi building blocks know a route by its shape; limits act at the pipeline's points and log;
  // observe hangs on the hooks; http is the request and its answer, which every layer above reads and writes.
  { name: 'pipeline', path: '^src/pipeline/' },
  { name: 'routes', path: '^src/routes/' },
  // Test mode (docs/test-mode.md): the test view of a storage and the generated datasets, which the routes choose by the key's mode.
  { name: 'testmode', path: '^src/testmode/' },
  { name: 'openapi', path: '^src/openapi/' },
  { name: 'limits', path: '^src/limits/' },
  { name: 'observe', path: '^src/observe/' },
  { name: 'http', path: '^src/http/' },
  // Webhooks: events, signing, the address guard, attempts and the dispatcher; above the listing (its
  // records are the events' data), below every layer of a request; never a storage's own files.
  { name: 'webhooks', path: '^src/webhooks/' },
  { name: 'auth-listing-signing', path: '^src/(auth|listing|signing)/' },
  // defaults.ts is the one table of defaults that the storages, the limits and the CLI all read;
  // version.ts the package's version, read from package.json (its one field, inlined by the build).
  { name: 'storage-json-errors', path: '^src/(storage|json)/|^src/(errors|defaults|version)\\.ts$|^package\\.json$' },
];

/**
 * Beside the layers: the merchant client, a library of its own that only the
 * CLI (`merchant-api check`) uses. Every module is in a layer or here (rule
 * outside-the-layers), so a new folder cannot slip past these rules.
 */
const CLIENT = '^src/client/';

/** What a storage implementation may see: the contract, the base of wrappers, the seed, JSON, the errors and the defaults. */
const STORAGE_CONTRACT = [
  '^src/storage/(contract|forwarding-storage|throttle-store|timestamps|order|user-pages|key-limits|key-changes|webhook-outbox|webhook-endpoints|webhook-deliveries|idempotency|test-changes)\\.ts$',
  '^src/storage/seed/',
  '^src/json/',
  '^src/(errors|defaults)\\.ts$',
];

/**
 * What any SQL storage shares (the merchant cache and directory, key sealing and ids, the statement
 * batcher): a storage of its own rank, used by the SQL storages and by nothing else.
 */
const SQL_SHARED = '^src/storage/sql/';
const SQL_STORAGES = '^src/storage/(mysql)/';

/**
 * The public entry points (package.json "exports"), which the CLI uses like any embedder, and its own
 * entry point for the few names it shares with the library that are no embedder's business.
 */
const CLI_INTERNAL = '^src/cli-internal(-redis)?\\.ts$';
const CLI_MAY_IMPORT = [
  '^src/cli/',
  '^src/index\\.ts$',
  CLI_INTERNAL,
  '^src/signing/index\\.ts$',
  '^src/observe/metrics\\.ts$',
  '^src/storage/(memory|mysql|redis)/index\\.ts$',
  '^src/client/index\\.ts$',
  '^adapters/(node|bun|deno)\\.ts$',
];

const LOCAL = '^(src|adapters)/';
const IN_A_LAYER = [...LAYERS.map((layer) => layer.path), CLIENT];

const upward = LAYERS.slice(1).map((layer, index) => {
  const above = LAYERS.slice(0, index + 1);
  return {
    name: `${layer.name}-imports-upward`,
    comment: `${layer.name} imports a layer above it (${above.map((l) => l.name).join(', ')})`,
    severity: 'error',
    from: { path: layer.path },
    to: { path: above.map((l) => l.path) },
  };
});

const cli = {
  name: 'cli-imports-entry-points-only',
  comment: 'the CLI imports only public entry points, src/cli-internal.ts and its own folder',
  severity: 'error',
  from: { path: '^src/cli/' },
  to: { path: LOCAL, pathNot: CLI_MAY_IMPORT },
};

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'a cycle makes its modules one: none of them can be read, tested or moved alone',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-unresolvable',
      comment: 'an import that does not resolve is invisible to every other rule',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'outside-the-layers',
      comment: 'a module in no layer: add its folder to LAYERS in this file and to docs/architecture.md',
      severity: 'error',
      from: { path: LOCAL, pathNot: IN_A_LAYER },
      to: {},
    },
    {
      name: 'outside-the-layers',
      comment: 'a module in no layer: add its folder to LAYERS in this file and to docs/architecture.md',
      severity: 'error',
      from: {},
      to: { path: LOCAL, pathNot: IN_A_LAYER },
    },
    ...upward,
    {
      name: 'storage-implementation-imports-contract-only',
      comment: 'memory, mysql, redis and the shared sql folder import the storage contract, the base of wrappers (forwarding-storage.ts), the seed, src/json, src/errors.ts, src/defaults.ts and their own folder; never each other, but for the SQL storages using src/storage/sql',
      severity: 'error',
      from: { path: '^src/storage/(memory|mysql|redis|sql)/' },
      to: { path: LOCAL, pathNot: ['^src/storage/$1/', SQL_SHARED, ...STORAGE_CONTRACT] },
    },
    {
      name: 'sql-shared-by-sql-storages-only',
      comment: 'src/storage/sql is what SQL storages share; nothing else imports it (the others reach it through a storage entry point)',
      severity: 'error',
      from: { pathNot: [SQL_STORAGES, SQL_SHARED] },
      to: { path: SQL_SHARED },
    },
    {
      name: 'client-imports-signing-json-and-types',
      comment: 'the client imports src/signing, src/json, and types from src/errors.ts and src/storage/contract.ts',
      severity: 'error',
      from: { path: CLIENT },
      to: { path: LOCAL, pathNot: [CLIENT, '^src/signing/', '^src/json/', '^src/errors\\.ts$', '^src/storage/contract\\.ts$'] },
    },
    {
      name: 'client-imports-signing-json-and-types',
      comment: 'the client takes only types from src/errors.ts and src/storage/contract.ts, so no server code ships with it',
      severity: 'error',
      from: { path: CLIENT },
      to: { path: ['^src/errors\\.ts$', '^src/storage/contract\\.ts$'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'client-used-by-cli-only',
      comment: 'the server never depends on the merchant client',
      severity: 'error',
      from: { pathNot: ['^src/cli/', CLIENT] },
      to: { path: CLIENT },
    },
    cli,
    {
      name: 'cli-internal-used-by-cli-only',
      comment: 'src/cli-internal.ts is the CLI\'s entry point: the library imports each name from its own file',
      severity: 'error',
      from: { pathNot: '^src/cli/' },
      to: { path: CLI_INTERNAL },
    },
  ],
  options: {
    // Type-only imports count: a cycle or an upward import through types ties files together all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
  },
};
