/** Where the reference page gets Swagger UI's files from (option `docsAssets`). */

/** The files of `swagger-ui-dist` the page serves. */
export type SwaggerUiFile = 'swagger-ui-bundle.js' | 'swagger-ui.css';

export interface DocsAssets {
  /** The `swagger-ui-dist` version: part of every asset path, so a new one is a new URL. */
  version: string;
  /** The text of one of its files. */
  read(file: SwaggerUiFile): Promise<string>;
}
