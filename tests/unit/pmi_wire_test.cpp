// The PMI-1 wire format (libcoll/bootstrap/pmi_wire.hpp): lines as Hydra
// sends them, lines no server should send, and blobs through chunks of the
// sizes a server may allow. The bootstrap itself runs against the real
// Hydra in tests/mpich.
#include <gtest/gtest.h>

#include <string>

#include "bootstrap/pmi_wire.hpp"

namespace {

using coll::pmi_wire::chunk_bytes;
using coll::pmi_wire::chunk_values;
using coll::pmi_wire::join_chunks;
using coll::pmi_wire::Message;
using coll::pmi_wire::parse_first_chunk;

TEST(PmiWire, ParsesHydrasAnswers) {
  auto maxes = Message::parse("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024");
  ASSERT_TRUE(maxes);
  EXPECT_EQ(maxes->command(), "maxes");
  EXPECT_EQ(maxes->get("vallen_max").value(), "1024");
  EXPECT_EQ(maxes->rc(), 0);  // no rc: success

  auto got = Message::parse("cmd=get_result rc=0 msg=success value=12:00ff");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->get("value").value(), "12:00ff");

  auto missing =
      Message::parse("cmd=get_result rc=-1 msg=key_libcoll.0.1.2.0_not_found value=unknown");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->rc(), -1);

  // A value may hold '=' after the first (split at the first one only),
  // and Hydra pads some lines with spaces.
  auto odd = Message::parse("cmd=x  a=b=c ");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->get("a").value(), "b=c");
  EXPECT_FALSE(odd->get("b"));
}

TEST(PmiWire, RefusesWhatIsNotPmi1) {
  EXPECT_FALSE(Message::parse(""));
  EXPECT_FALSE(Message::parse("hello"));                     // no '='
  EXPECT_FALSE(Message::parse("=x cmd=y"));                  // empty key
  EXPECT_FALSE(Message::parse("rc=0 cmd=put_result"));       // cmd not first
  EXPECT_FALSE(Message::parse("cmd="));                      // empty command
  EXPECT_FALSE(Message::parse(std::string("cmd=a\0b", 7)));  // control character
  EXPECT_FALSE(Message::parse("cmd=a\tb=c"));
  EXPECT_FALSE(Message::parse("cmd=" + std::string(coll::pmi_wire::kMaxLineBytes, 'x')));
  auto bad_rc = Message::parse("cmd=put_result rc=zero");
  ASSERT_TRUE(bad_rc);
  EXPECT_FALSE(bad_rc->rc());
}

// Every byte value, at lengths around the chunk boundaries of two value
// limits: Hydra's 1024 and a small one.
TEST(PmiWire, BlobsSurviveChunking) {
  for (size_t vallen : {size_t{1024}, size_t{90}}) {
    size_t per = chunk_bytes(vallen);
    ASSERT_GT(per, 0u);
    for (size_t length : {size_t{0}, size_t{1}, per - 1, per, per + 1, 3 * per, 3 * per + 7}) {
      std::string blob;
      for (size_t i = 0; i < length; ++i) blob.push_back(static_cast<char>((i * 37 + 11) & 0xff));
      auto values = chunk_values(blob, vallen);
      ASSERT_EQ(values.size(), length == 0 ? 1 : (length - 1) / per + 1) << length;
      for (const auto& v : values) EXPECT_LE(v.size(), vallen - 1) << "value cut short by Hydra";
      auto header = parse_first_chunk(values[0], vallen);
      ASSERT_TRUE(header);
      EXPECT_EQ(header->length, length);
      EXPECT_EQ(header->chunks, values.size());
      auto back = join_chunks(values, vallen);
      ASSERT_TRUE(back) << length;
      EXPECT_EQ(*back, blob);
    }
  }
}

TEST(PmiWire, RefusesBrokenChunks) {
  const size_t vallen = 1024;
  std::string blob(1600, 'q');  // 501 bytes a chunk at 1024: 4 chunks
  auto values = chunk_values(blob, vallen);
  ASSERT_EQ(values.size(), 4u);

  auto missing_one = values;
  missing_one.pop_back();
  EXPECT_FALSE(join_chunks(missing_one, vallen));
  auto bad_hex = values;
  bad_hex[1][5] = 'G';
  EXPECT_FALSE(join_chunks(bad_hex, vallen));
  auto short_chunk = values;
  short_chunk[2].pop_back();
  EXPECT_FALSE(join_chunks(short_chunk, vallen));

  EXPECT_FALSE(parse_first_chunk("unknown", vallen));  // Hydra's value for no key
  EXPECT_FALSE(parse_first_chunk(":00", vallen));
  EXPECT_FALSE(parse_first_chunk("2:00", vallen));   // says 2 bytes, carries 1
  EXPECT_FALSE(parse_first_chunk("01:00", vallen));  // not as chunk_values spells it
  EXPECT_FALSE(parse_first_chunk("99999999999999999999999:", vallen));  // overflows
  EXPECT_TRUE(parse_first_chunk("0:", vallen));
  EXPECT_FALSE(join_chunks({}, vallen));
  EXPECT_EQ(chunk_bytes(40), 0u);  // too small a limit is refused
}

}  // namespace
