/**
 * The package's own version, from package.json: what names the product to others (the webhook
 * `user-agent`). An import with the JSON attribute, which Deno requires to run the source; the
 * bundle holds package.json's fields (esbuild keeps what is read of a default JSON import).
 */
import packageJson from '../package.json' with { type: 'json' };

export const PACKAGE_VERSION: string = packageJson.version;
