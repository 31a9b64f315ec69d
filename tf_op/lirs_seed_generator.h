// The seed-generator protocol of ShuffleDatasetV3 (TensorFlow's
// shuffle_dataset_op.cc), so that LIRSDataset's reshuffle_each_iteration and
// tf.random.set_seed behave as with Dataset.shuffle: the op takes (seed, seed2)
// and a generator handle; each iteration draws its seeds from the generator the
// handle names, shared by every copy of the dataset a graph rewrite makes.
#ifndef TFRECORD_LIRS_TF_OP_LIRS_SEED_GENERATOR_H_
#define TFRECORD_LIRS_TF_OP_LIRS_SEED_GENERATOR_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/kernels/data/random_seed_ops.h"
#include "tensorflow/core/platform/mutex.h"

namespace tfrecord_lirs {

// One dataset's reference to its seed generator.
class SeedGeneratorRef {
 public:
  // The generator registered under input `input`'s handle. Python passes a dummy
  // handle: when nothing is registered under it, a generator is created (and
  // owned: deleted with this reference) under a fresh name, and `handle()` names
  // it, so that a dataset rebuilt from the serialized graph shares it.
  static absl::Status Make(tensorflow::OpKernelContext* ctx, int input,
                           int64_t seed, int64_t seed2, bool reshuffle,
                           std::unique_ptr<SeedGeneratorRef>* out) {
    using tensorflow::data::SeedGeneratorManager;
    tensorflow::ResourceHandle handle =
        tensorflow::HandleFromInput(ctx, input);
    tensorflow::ResourceMgr* resources = ctx->resource_manager();
    SeedGeneratorManager* manager = nullptr;
    absl::Status s = resources->Lookup<SeedGeneratorManager>(
        handle.container(), handle.name(), &manager);
    bool owned = false;
    if (absl::IsNotFound(s)) {
      static std::atomic<int64_t> counter(0);
      const std::string name = absl::StrCat(ctx->op_kernel().name(),
                                            "/seed_generator_", counter++);
      tensorflow::data::RandomSeeds seeds(seed, seed2);
      TF_RETURN_IF_ERROR(resources->LookupOrCreate<SeedGeneratorManager>(
          kContainer, name, &manager,
          [reshuffle, &seeds](SeedGeneratorManager** m) {
            *m = new SeedGeneratorManager(
                reshuffle ? static_cast<tensorflow::data::SeedGenerator*>(
                                new tensorflow::data::RandomSeedGenerator(seeds))
                          : new tensorflow::data::FixedSeedGenerator(seeds));
            return absl::OkStatus();
          }));
      handle = tensorflow::MakeResourceHandle<SeedGeneratorManager>(
          ctx, kContainer, name);
      owned = true;
    } else {
      TF_RETURN_IF_ERROR(s);
    }
    out->reset(new SeedGeneratorRef(manager, std::move(handle), resources, owned));
    return absl::OkStatus();
  }

  ~SeedGeneratorRef() {
    manager_->Unref();
    if (!owned_) return;
    absl::Status s = resources_->Delete<tensorflow::data::SeedGeneratorManager>(
        handle_.container(), handle_.name());
    if (!s.ok()) LOG(WARNING) << "LIRSDataset: failed to delete seed generator: " << s;
  }

  // Whether this reference made the generator (a dataset rebuilt from a
  // serialized graph shares the one made before).
  bool owned() const { return owned_; }

  // Draws an iteration's pair, and the generator's count after the draw (which
  // iteration it is): one draw at a time across iterators, so that the count is
  // this draw's.
  void Draw(int64_t* seed, int64_t* seed2, int64_t* num_random_samples) const {
    static tensorflow::mutex* mu = new tensorflow::mutex;
    tensorflow::mutex_lock l(*mu);
    std::shared_ptr<tensorflow::data::SeedGenerator> g = generator();
    g->GenerateSeeds(seed, seed2);
    *num_random_samples = g->num_random_samples();
  }

  // The generator's handle, for the serialized graph.
  const tensorflow::ResourceHandle& handle() const { return handle_; }
  std::shared_ptr<tensorflow::data::SeedGenerator> generator() const {
    return manager_->get();
  }

 private:
  static constexpr char kContainer[] = "tfrecord_lirs";

  SeedGeneratorRef(tensorflow::data::SeedGeneratorManager* manager,
                   tensorflow::ResourceHandle handle,
                   tensorflow::ResourceMgr* resources, bool owned)
      : manager_(manager), handle_(std::move(handle)), resources_(resources),
        owned_(owned) {}

  tensorflow::data::SeedGeneratorManager* const manager_;  // One reference.
  const tensorflow::ResourceHandle handle_;
  tensorflow::ResourceMgr* const resources_;  // Not owned.
  const bool owned_;
};

}  // namespace tfrecord_lirs

#endif  // TFRECORD_LIRS_TF_OP_LIRS_SEED_GENERATOR_H_
