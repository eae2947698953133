/**
 * The default source of Swagger UI's files: the optional package
 * `swagger-ui-dist`, read from disk where the runtime has `node:fs` (Node,
 * Bun, Deno). Both imports are dynamic, so the core imports nothing of a
 * runtime until the page is first asked for; elsewhere (or without the
 * package) the page answers 404 with a hint, unless the embedder gives its own
 * source (`docsAssets`).
 */
import type { DocsAssets, SwaggerUiFile } from './assets.js';

// Held in variables: bundlers and TypeScript leave such imports to the runtime.
const FS = 'node:fs/promises';
const PATH = 'node:path';
const ABSOLUTE_PATH = 'swagger-ui-dist/absolute-path.js';

export async function swaggerUiDist(): Promise<DocsAssets> {
  const [{ readFile }, { join }, located] = await Promise.all([
    import(FS) as Promise<typeof import('node:fs/promises')>,
    import(PATH) as Promise<typeof import('node:path')>,
    import(ABSOLUTE_PATH) as Promise<{ default: () => string }>,
  ]);
  const folder = located.default();
  const { version } = JSON.parse(await readFile(join(folder, 'package.json'), 'utf8')) as { version: string };
  return { version, read: (file: SwaggerUiFile) => readFile(join(folder, file), 'utf8') };
}
