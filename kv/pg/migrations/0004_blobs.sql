-- Version 4: the bytes of uploaded files, so that every gateway on the
-- database reads a file uploaded through any of them. A blob is named by
-- the SHA-256 of its bytes and kept in chunks of at most 1 MiB (a read
-- holds one chunk in memory, and a Range request reads only the chunks it
-- needs). What the gateway knows of each file (owner, expiry, how many
-- records name a blob) stays in its files bucket; the blob is deleted in
-- the transaction that deletes the last record naming it.
CREATE TABLE blobs (
    sha256 text PRIMARY KEY,
    size   bigint NOT NULL CHECK (size >= 0)
);

CREATE TABLE blob_chunks (
    sha256 text NOT NULL REFERENCES blobs ON DELETE CASCADE,
    n      integer NOT NULL CHECK (n >= 0),
    data   bytea NOT NULL,
    PRIMARY KEY (sha256, n)
);
