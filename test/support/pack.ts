/**
 * The tarball as `npm run pack` makes it (scripts/pack.mjs: the files of `npm pack`, package.json
 * without `prepare`), for the suites that install the package into a project of their own.
 * dist/ must be built: `pretest` builds it, and nothing here rebuilds it while other files read it.
 */
import { join } from 'node:path';
import { ROOT, runInDirectory } from './processes.js';

export async function packPackage(destination: string): Promise<{ tarball: string; files: string[] }> {
  const packed = await runInDirectory(process.execPath, [`${ROOT}scripts/pack.mjs`, '--json', '--pack-destination', destination], ROOT);
  if (packed.code !== 0) throw new Error(`scripts/pack.mjs failed:\n${packed.stdout}\n${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  return { tarball: join(destination, info!.filename), files: info!.files.map((file) => file.path).sort() };
}
