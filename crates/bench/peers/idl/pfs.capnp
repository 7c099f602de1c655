# The paper's three SawMill file-system calls (IDL4, Table 4), the null
# call and IOzone's 4 KiB read, as Cap'n Proto structs for the capnp peer of
# `fastpath bench idl`: one request and one reply struct per call (in values;
# inout, out and return values). `int` is `Int32`; a `size_is` array is a
# `List(Int32)`; file data is `Data`.
@0x8273ee44662c509c;

struct NullRequest {}
struct NullReply {}

struct OpenRequest {
  client @0 :Int32;
  fobj @1 :Int32;
  flags @2 :Int32;
  mode @3 :Int32;
}
struct OpenReply {
  ret @0 :Int32;
  handle @1 :Int32;
}

struct WriteRequest {
  handle @0 :Int32;
  pos @1 :Int32;
  len @2 :Int32;
  data @3 :List(Int32);
}
struct WriteReply {
  ret @0 :Int32;
  pos @1 :Int32;
}

struct GetDirentriesRequest {
  handle @0 :Int32;
  pos @1 :Int32;
  count @2 :Int32;
}
struct GetDirentriesReply {
  ret @0 :Int32;
  pos @1 :Int32;
  data @2 :List(Int32);
}

struct ReadRequest {
  handle @0 :Int32;
  offset @1 :Int32;
  count @2 :Int32;
}
struct ReadReply {
  ret @0 :Int32;
  data @1 :Data;
}
