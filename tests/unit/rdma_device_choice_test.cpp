// Which RDMA device a rank takes when the user does not say
// (rdma_device_choice.hpp), on made-up topologies: this machine has one
// package and no NIC.
#include "transport/rdma_device_choice.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace coll {
namespace {

cpu_set_t cpus(int first, int count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = first; c < first + count; ++c) CPU_SET(c, &set);
  return set;
}

DeviceLocality near(const char* name, int first, int count) {
  return {name, true, cpus(first, count)};
}

DeviceLocality unplaced(const char* name) { return {name, false, {}}; }

// Two packages of 8 cores, a NIC on each.
TEST(RdmaDeviceChoice, ARankTakesTheNicOfItsPackage) {
  const std::vector<DeviceLocality> nics{near("mlx5_0", 0, 8), near("mlx5_1", 8, 8)};
  EXPECT_EQ(choose_nearest_device(nics, cpus(2, 1), 0), 0u);
  EXPECT_EQ(choose_nearest_device(nics, cpus(9, 1), 0), 1u);
  EXPECT_EQ(choose_nearest_device(nics, cpus(12, 4), 7), 1u);
  // Bound across both packages, more of it on the second.
  EXPECT_EQ(choose_nearest_device(nics, cpus(6, 6), 0), 1u);
}

// Two NICs on one package (rails): its ranks spread over both by rank; a
// rank of the other package takes its own NIC.
TEST(RdmaDeviceChoice, RanksOfAPackageSpreadOverItsRails) {
  const std::vector<DeviceLocality> nics{near("mlx5_0", 0, 8), near("mlx5_1", 0, 8),
                                         near("mlx5_2", 8, 8)};
  EXPECT_EQ(choose_nearest_device(nics, cpus(1, 1), 0), 0u);
  EXPECT_EQ(choose_nearest_device(nics, cpus(1, 1), 1), 1u);
  EXPECT_EQ(choose_nearest_device(nics, cpus(1, 1), 2), 0u);
  EXPECT_EQ(choose_nearest_device(nics, cpus(10, 1), 1), 2u);
}

// Devices hwloc does not place (software devices such as rxe, or no hwloc):
// the first, as before; a placed device beats them only where it holds the
// rank's CPUs.
TEST(RdmaDeviceChoice, UnplacedDevicesKeepTheFirst) {
  EXPECT_EQ(choose_nearest_device({unplaced("rxe0"), unplaced("rxe1")}, cpus(0, 2), 1), 0u);
  const std::vector<DeviceLocality> mixed{unplaced("rxe0"), near("mlx5_0", 8, 8)};
  EXPECT_EQ(choose_nearest_device(mixed, cpus(9, 1), 0), 1u);
  EXPECT_EQ(choose_nearest_device(mixed, cpus(0, 1), 0), 0u);
  EXPECT_EQ(choose_nearest_device({near("mlx5_0", 0, 4)}, cpus(0, 1), -3), 0u);
}

// hwloc on this machine: no OpenFabrics device, nothing placed, nothing
// broken.
TEST(RdmaDeviceChoice, LocatingAnAbsentDeviceLeavesItUnplaced) {
  std::vector<DeviceLocality> devices{unplaced("no-such-device0")};
  locate_devices(&devices);
  EXPECT_FALSE(devices[0].known);
}

}  // namespace
}  // namespace coll
