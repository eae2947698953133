/**
 * The package's own version, from package.json: what names the product to others (the webhook
 * `user-agent`). A named import of the one field: the build inlines that string and none of the
 * rest of package.json; run from source, the file is read as it is.
 */
import { version } from '../package.json';

export const PACKAGE_VERSION: string = version;
