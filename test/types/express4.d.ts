/** Express 4, installed under the npm alias `express4` for the embedding tests: typed as Express (its app and middleware shapes are the same there). */
declare module 'express4' {
  import express from 'express';
  export default express;
}
