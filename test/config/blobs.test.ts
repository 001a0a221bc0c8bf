import t from "tap";
import { loadConfig } from "../../src/config/env.js";

t.test("BLOB_STORE=s3 is taken with its bucket, endpoint and keys", async (t) => {
  const config = loadConfig({
    BLOB_STORE: "s3",
    S3_BUCKET: "files",
    S3_ENDPOINT: "http://127.0.0.1:9000",
    S3_ACCESS_KEY_ID: "id",
    S3_SECRET_ACCESS_KEY: "secret",
  });
  t.equal(config.blobs.store, "s3");
  t.match(config.blobs.s3, {
    bucket: "files",
    region: "us-east-1",
    endpoint: "http://127.0.0.1:9000",
    forcePathStyle: true,
    credentials: { accessKeyId: "id", secretAccessKey: "secret" },
  });
  t.notOk(loadConfig({ BLOB_STORE: "s3", S3_BUCKET: "files" }).blobs.s3?.credentials, "no keys: the AWS SDK's own chain");
});

t.test("an S3 store without a bucket, with half its keys or a bad endpoint is refused at start, each reason said", async (t) => {
  t.throws(() => loadConfig({ BLOB_STORE: "s3", S3_ENDPOINT: "minio:9000", S3_ACCESS_KEY_ID: "id" }), {
    name: "ConfigError",
    problems: [/S3_BUCKET is required/, /S3_ENDPOINT=minio:9000 is not an http/, /S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together/],
  });
});
