/** How a route authenticates: a signed query (checked by its handler), HTTP Basic (checked before the handler runs), or not at all. */
export type AuthScheme = 'signature' | 'basic' | 'none';
