// Figure 5 of Xu, Kumar and Li (PACT 2004): the fast path of figure2.esp
// that sends a request of fewer than 10000 bytes whose translations are cached.
fastpath demo {
  process hostRequest {
    statement  hostSendRequestC as H0,
               translateRequestC as H1,
               translateReplyC as H2,
               dataSendC as H3,
               #1;
    start      H0 ? (size < 10000);
    follows    H1 ( H2 H3 )* ;
    exit       #1;
  }
  process translateAddress {
    statement  translateRequestC as T1, #2;
    start      T1 <=> H1;
    exit       T1;
  }
  process networkSend {
    statement  dataSendC, #3;
    start      dataSendC;
    exit       #3;
  }
}
