// LIRSDataset: full-range shuffled reading of TFRecord files through offset
// tables. TensorFlow glue only, shaped like tf_record_dataset_op.cc. A Rust
// LirsDataset (crates/tfrecord-lirs-ffi) reads and checks the attrs and inputs,
// shares the reader and knows the element shape and cardinality; each Iterator
// holds a Rust DatasetCursor, which decides the epoch walk and its checkpoint
// state. Here: tensors and tstring views, the seed generator of
// ShuffleDatasetV3 (lirs_seed_generator.h; Rust decides which seed and epoch an
// iteration orders with, from the pair it draws), checkpoint keys
// (num_random_samples, the generator's; the rest under the keys Rust names),
// statuses, and splits: under a split provider (tf.data service
// distributed_epoch, ShardingPolicy.DYNAMIC) the iterator reads the parts of the
// epoch the provider hands out, each a Rust cursor (Rust decides how many parts
// there are and which positions each holds), as range_dataset_op.cc does.
// LIRSShardHintDataset is the same dataset, its shard pair read from its input
// dataset (range(2**62).shard(SHARD_HINT, SHARD_HINT).take(2), kept in the graph
// so that tf.data's HINT rewrite fills the hint in): a top-level node whose seed
// generator lives across iterations, where a flat_map would make it anew.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lirs_seed_generator.h"
#include "lirs_status.h"
#include "tensorflow/core/data/dataset_utils.h"
#include "tensorflow/core/data/name_utils.h"
#include "tensorflow/core/data/split_utils.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/platform/refcount.h"
#include "tensorflow/core/platform/tstring.h"

namespace tensorflow {
namespace data {
namespace {

namespace lirs = ::tfrecord_lirs;
namespace ffi = lirs::ffi;
using lirs::CallRust;
using ffi::BatchView;
using ffi::DatasetCursor;
using ffi::LirsDataset;

constexpr char kHintOp[] = "LIRSShardHintDataset";

// A batch's records (Rust owns the fetch windows they were read into), shared by
// reference count between every tstring of the batch tensor: the windows go back
// to the fetch for reuse when the last of those is gone.
using BatchOwner = tstring::owner<rust::Box<BatchView>>;

// `record` as a view shared with `owner`, or a copy without one; records that fit
// in a tstring's inline buffer are copied either way.
void Assign(rust::Slice<const uint8_t> record, BatchOwner* owner, tstring* out) {
  const char* data = reinterpret_cast<const char*>(record.data());
  if (owner != nullptr && record.size() > TF_TString_SmallCapacity) {
    out->assign_as_shared_view(data, record.size(), owner);
  } else {
    out->assign(data, record.size());
  }
}

}  // namespace

class LIRSDatasetOp : public DatasetOpKernel {
 public:
  static constexpr const char* const kDatasetType = "LIRS";

  // The attrs go to Rust as they are; it reads and checks them in MakeDataset.
  explicit LIRSDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    for (const auto& [name, value] : ctx->def().attr()) {
      if (lirs::IsOpAttr(name)) graph_attrs_.emplace_back(name, value);
    }
    OP_REQUIRES_OK(ctx, lirs::AttrValues(ctx->def(), &attrs_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("reshuffle_each_iteration", &reshuffle_));
    hint_ = ctx->def().op() == kHintOp;
  }

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override;

 private:
  class Dataset;
  std::vector<std::pair<std::string, AttrValue>> graph_attrs_;
  rust::Vec<ffi::NamedValue> attrs_;  // MakeDataset adds the scalar inputs.
  bool reshuffle_ = true;
  bool hint_ = false;  // LIRSShardHintDataset: input 0 is the hint's dataset.
};

class LIRSDatasetOp::Dataset : public DatasetBase {
 public:
  Dataset(OpKernelContext* ctx, const LIRSDatasetOp& op,
          std::vector<Tensor> inputs, rust::Box<LirsDataset> rust_dataset,
          std::unique_ptr<lirs::SeedGeneratorRef> seeds, int64_t seed,
          int64_t seed2, int seed_generator_input, const DatasetBase* hint,
          absl::Status pending)
      : DatasetBase(DatasetContext(ctx)),
        graph_attrs_(op.graph_attrs_),
        inputs_(std::move(inputs)),
        lirs_(std::move(rust_dataset)),
        dims_(lirs_->element_dims()),
        output_shapes_({PartialTensorShape(dims_)}),
        seeds_(std::move(seeds)),
        seed_(seed),
        seed2_(seed2),
        seed_generator_input_(seed_generator_input),
        hint_(hint),
        pending_(std::move(pending)) {
    if (hint_ != nullptr) hint_->Ref();
  }

  ~Dataset() override {
    if (hint_ != nullptr) hint_->Unref();
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{
        this, name_utils::IteratorPrefix(kDatasetType, prefix)});
  }

  const DataTypeVector& output_dtypes() const override {
    static DataTypeVector* dtypes = new DataTypeVector({DT_STRING});
    return *dtypes;
  }

  const std::vector<PartialTensorShape>& output_shapes() const override {
    return output_shapes_;
  }

  std::string DebugString() const override {
    return name_utils::DatasetDebugString(kDatasetType);
  }

  int64_t CardinalityInternal(CardinalityOptions options) const override {
    // Unfilled hint: the shard is the worker's, unknown here.
    if (!pending_.ok()) return kUnknownCardinality;
    return lirs_->cardinality();
  }

  absl::Status InputDatasets(
      std::vector<const DatasetBase*>* inputs) const override {
    if (hint_ != nullptr) inputs->push_back(hint_);
    return absl::OkStatus();
  }

  absl::Status CheckExternalState() const override { return absl::OkStatus(); }

  // One split per part of the epoch; Rust says how many, or why this dataset
  // cannot be read in splits.
  absl::Status MakeSplitProviders(std::vector<std::unique_ptr<SplitProvider>>*
                                      split_providers) const override {
    TF_RETURN_IF_ERROR(pending_);
    int64_t count = 0;
    TF_RETURN_IF_ERROR(SplitCount(&count));
    split_providers->push_back(std::make_unique<IndexSplitProvider>(count));
    return absl::OkStatus();
  }

  absl::Status SplitCount(int64_t* count) const {
    return CallRust("", [&](ffi::Status& st) {
      *count = lirs_->split_count(seed_, seed2_, st);
    });
  }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx,
                                  DatasetGraphDefBuilder* b,
                                  Node** output) const override {
    // The inputs as given, but for the seed generator: the handle of the one
    // this dataset uses, so a dataset rebuilt from this graph (tf.data
    // rewrites) shares it and keeps reshuffling.
    Tensor handle(DT_RESOURCE, TensorShape({}));
    handle.scalar<ResourceHandle>()() = seeds_->handle();
    // The hint's dataset goes with it, for the HINT rewrite where it is rebuilt.
    std::vector<Node*> inputs(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (i == 0 && hint_ != nullptr) {
        TF_RETURN_IF_ERROR(b->AddInputDataset(ctx, hint_, &inputs[i]));
        continue;
      }
      TF_RETURN_IF_ERROR(b->AddTensor(
          static_cast<int>(i) == seed_generator_input_ ? handle : inputs_[i],
          &inputs[i]));
    }
    return b->AddDataset(this, inputs, {graph_attrs_.begin(), graph_attrs_.end()},
                         output);
  }

 private:
  class Iterator : public DatasetIterator<Dataset> {
   public:
    static constexpr const char* const kNumRandomSamples = "num_random_samples";
    static constexpr const char* const kShardStateKey = "shard_state";
    // Under splits: the part state (Rust's bytes) and the split provider's keys.
    static constexpr const char* const kPartStateKey = "part_state";
    static constexpr const char* const kSplitProviderKey = "split_provider";

    explicit Iterator(const Params& params)
        : DatasetIterator<Dataset>(params),
          seed_generator_(dataset()->seeds_->generator()) {}

    bool SymbolicCheckpointCompatible() const override { return true; }

    absl::Status Initialize(IteratorContext* ctx) override {
      // An unfilled hint fails here, with TensorFlow's message naming SHARD_HINT.
      TF_RETURN_IF_ERROR(dataset()->pending_);
      mutex_lock l(mu_);
      // Unordered (RINAS) or not: Rust decides from the op's attr and the
      // pipeline's tf.data.Options().deterministic.
      const Options* o = ctx->options();
      unordered_ = dataset()->lirs_->unordered(
          o == nullptr || o->optional_deterministic_case() !=
                              Options::kDeterministic ? -1 : o->deterministic());
      if (!ctx->split_providers().empty()) {
        int64_t count = 0;
        TF_RETURN_IF_ERROR(dataset()->SplitCount(&count));
        TF_ASSIGN_OR_RETURN(split_provider_,
                            GetSingleSplitProvider(ctx, dataset()));
        // No cursor until the first split: nothing is read before.
        dataset()->seeds_->Draw(&seeds_.seed, &seeds_.seed2,
                                &seeds_.num_random_samples);
        return absl::OkStatus();
      }
      // The iteration an epoch state resumes takes that state's seeds, and the
      // generator goes on from there; every other draws fresh ones.
      ffi::IterationSeeds s{0, 0, 0};
      const bool from_epoch_state = dataset()->lirs_->take_epoch_state(s);
      if (from_epoch_state) {
        seed_generator_->set_num_random_samples(s.num_random_samples);
        seed_generator_->Reset();
      } else {
        dataset()->seeds_->Draw(&s.seed, &s.seed2, &s.num_random_samples);
      }
      return CallRust("LIRSDataset: ", [&](ffi::Status& st) {
        cursor_ = std::make_unique<rust::Box<DatasetCursor>>(
            dataset()->lirs_->start(s, unordered_, from_epoch_state, st));
      });
    }

    absl::Status GetNextInternal(IteratorContext* ctx,
                                 std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      mutex_lock l(mu_);
      if (split_provider_ == nullptr) {
        return Read(ctx, out_tensors, end_of_sequence);
      }
      // The parts the provider hands out, one after the other; the finished
      // part's cursor stays until the next split (its checkpoint says so).
      while (true) {
        if (cursor_ != nullptr && !part_done_) {
          TF_RETURN_IF_ERROR(Read(ctx, out_tensors, end_of_sequence));
          if (!*end_of_sequence) return absl::OkStatus();
          part_done_ = true;
        }
        Tensor split;
        bool end_of_splits = false;
        TF_RETURN_IF_ERROR(split_provider_->GetNext(&split, &end_of_splits));
        if (end_of_splits) {
          *end_of_sequence = true;
          return absl::OkStatus();
        }
        const int64_t part = split.scalar<int64_t>()();
        TF_RETURN_IF_ERROR(CallRust("LIRSDataset: ", [&](ffi::Status& st) {
          cursor_ = std::make_unique<rust::Box<DatasetCursor>>(
              dataset()->lirs_->start_part(seeds_, unordered_, part, st));
        }));
        part_done_ = false;
      }
    }

   private:
    // The cursor's next element (end_of_sequence at the end of its walk).
    absl::Status Read(IteratorContext* ctx, std::vector<Tensor>* out_tensors,
                      bool* end_of_sequence) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      DatasetCursor& cursor = **cursor_;
      if (dataset()->dims_.empty()) {  // one record
        TF_RETURN_IF_ERROR(CallRust("LIRSDataset: ", [&](ffi::Status& st) {
          *end_of_sequence = !cursor.next_element(st);
        }));
        if (*end_of_sequence) return absl::OkStatus();
        out_tensors->emplace_back(ctx->allocator({}), DT_STRING, TensorShape({}));
        tstring* out = &out_tensors->back().scalar<tstring>()();
        if (!cursor.element_may_view()) {
          Assign(cursor.element(), nullptr, out);
          return absl::OkStatus();
        }
        core::RefCountPtr<BatchOwner> owner(new BatchOwner(cursor.element_view()));
        Assign(owner->value()->record(0), owner.get(), out);
        return absl::OkStatus();
      }
      std::unique_ptr<rust::Box<BatchView>> batch;
      TF_RETURN_IF_ERROR(CallRust("LIRSDataset: ", [&](ffi::Status& st) {
        batch = std::make_unique<rust::Box<BatchView>>(cursor.next_batch(st));
      }));
      const int64_t n = static_cast<int64_t>((*batch)->len());
      *end_of_sequence = n == 0;
      if (n == 0) return absl::OkStatus();
      // The batch's strings view their records where the fetch read them, all
      // sharing one owner.
      core::RefCountPtr<BatchOwner> owner(new BatchOwner(std::move(*batch)));
      out_tensors->emplace_back(ctx->allocator({}), DT_STRING, TensorShape({n}));
      auto flat = out_tensors->back().flat<tstring>();
      for (int64_t i = 0; i < n; ++i) {
        Assign(owner->value()->record(i), owner.get(), &flat(i));
      }
      return absl::OkStatus();
    }

   protected:
    std::shared_ptr<model::Node> CreateNode(
        IteratorContext* ctx, model::Node::Args args) const override {
      return model::MakeSourceNode(std::move(args));
    }

    absl::Status SaveInternal(SerializationContext* ctx,
                              IteratorStateWriter* writer) override {
      mutex_lock l(mu_);
      const int64_t samples = seed_generator_->num_random_samples();
      if (split_provider_ != nullptr) return SaveSplits(writer, samples);
      rust::Vec<uint8_t> state;
      TF_RETURN_IF_ERROR(
          CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
            state = (*cursor_)->save(samples, st);
          }));
      TF_RETURN_IF_ERROR(
          writer->WriteScalar(prefix(), kNumRandomSamples, samples));
      return writer->WriteScalar(
          prefix(), kShardStateKey,
          tstring(reinterpret_cast<const char*>(state.data()), state.size()));
    }

    absl::Status RestoreInternal(IteratorContext* ctx,
                                 IteratorStateReader* reader) override {
      mutex_lock l(mu_);
      int64_t samples = 0;
      TF_RETURN_IF_ERROR(
          reader->ReadScalar(prefix(), kNumRandomSamples, &samples));
      seed_generator_->set_num_random_samples(samples);
      seed_generator_->Reset();
      if (reader->Contains(prefix(), kPartStateKey)) {
        return RestoreSplits(ctx, reader);
      }
      if (split_provider_ != nullptr) {
        return absl::FailedPreconditionError(
            "LIRSDataset checkpoint: it was not read in splits, this iterator "
            "reads the splits of a tf.data service");
      }
      // The values under the keys Rust names (older checkpoints' too): it
      // tells them apart.
      rust::Vec<ffi::NamedValue> saved;
      for (const rust::String& key : ffi::checkpoint_keys()) {
        const std::string k(key);
        if (!reader->Contains(prefix(), k)) continue;
        Tensor t;
        TF_RETURN_IF_ERROR(reader->ReadTensor(prefix(), k, &t));
        TF_RETURN_IF_ERROR(lirs::AddNamedValue(k, t, &saved));
      }
      // The current cursor is kept if this fails.
      return CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
        cursor_ = std::make_unique<rust::Box<DatasetCursor>>(
            dataset()->lirs_->restore(samples, unordered_, saved, st));
      });
    }

   private:
    std::string SplitProviderKey(const std::string& key) {
      return full_name(absl::StrCat(kSplitProviderKey, "/", key));
    }

    absl::Status SaveSplits(IteratorStateWriter* writer, int64_t samples)
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      TF_RETURN_IF_ERROR(split_provider_->Save(
          [this](const std::string& key) { return SplitProviderKey(key); },
          writer));
      rust::Vec<uint8_t> state;
      if (cursor_ == nullptr) {
        state = dataset()->lirs_->save_no_part(seeds_);
      } else {
        TF_RETURN_IF_ERROR(
            CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
              state = (*cursor_)->save_part(seeds_.num_random_samples, st);
            }));
      }
      TF_RETURN_IF_ERROR(
          writer->WriteScalar(prefix(), kNumRandomSamples, samples));
      return writer->WriteScalar(
          prefix(), kPartStateKey,
          tstring(reinterpret_cast<const char*>(state.data()), state.size()));
    }

    absl::Status RestoreSplits(IteratorContext* ctx, IteratorStateReader* reader)
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (split_provider_ == nullptr) {
        return absl::FailedPreconditionError(
            "LIRSDataset checkpoint: it was read in splits (tf.data service), "
            "this iterator has no split provider");
      }
      TF_RETURN_IF_ERROR(split_provider_->Restore(
          [this](const std::string& key) { return SplitProviderKey(key); },
          reader));
      tstring saved;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kPartStateKey, &saved));
      const rust::Slice<const uint8_t> bytes(
          reinterpret_cast<const uint8_t*>(saved.data()), saved.size());
      ffi::IterationSeeds seeds{0, 0, 0};
      bool has_part = false;
      TF_RETURN_IF_ERROR(
          CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
            has_part = dataset()->lirs_->part_state_seeds(bytes, seeds, st);
          }));
      std::unique_ptr<rust::Box<DatasetCursor>> cursor;
      if (has_part) {
        TF_RETURN_IF_ERROR(
            CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
              cursor = std::make_unique<rust::Box<DatasetCursor>>(
                  dataset()->lirs_->restore_part(unordered_, bytes, st));
            }));
      }
      seeds_ = seeds;
      cursor_ = std::move(cursor);
      part_done_ = false;
      return absl::OkStatus();
    }

    mutex mu_;
    bool unordered_ TF_GUARDED_BY(mu_) = false;
    // Under splits: the provider, the iteration's seeds (every part is of its
    // order), and whether the current part's cursor is at its end.
    std::shared_ptr<SplitProvider> split_provider_;
    ffi::IterationSeeds seeds_ TF_GUARDED_BY(mu_){0, 0, 0};
    bool part_done_ TF_GUARDED_BY(mu_) = false;
    std::shared_ptr<SeedGenerator> seed_generator_;
    std::unique_ptr<rust::Box<DatasetCursor>> cursor_ TF_GUARDED_BY(mu_);
  };

  const std::vector<std::pair<std::string, AttrValue>> graph_attrs_;
  const std::vector<Tensor> inputs_;
  const rust::Box<LirsDataset> lirs_;
  const rust::Vec<int64_t> dims_;  // Of every element: [], [batch] or [-1].
  const std::vector<PartialTensorShape> output_shapes_;
  const std::unique_ptr<lirs::SeedGeneratorRef> seeds_;
  // The op's seed inputs: splits need a fixed pair (every worker walks the same
  // order), which Rust checks.
  const int64_t seed_;
  const int64_t seed2_;
  const int seed_generator_input_;
  const DatasetBase* const hint_;  // LIRSShardHintDataset's input, one reference.
  // Why the hint's shard could not be read (hint not filled in): every iterator
  // fails with it, and the Rust dataset is a stand-in (shard 0 of 1) never read.
  const absl::Status pending_;
};

namespace {

// The first two elements a, b of the hint's dataset: shard k of W starts [k, k+W].
absl::Status ReadHint(OpKernelContext* ctx, const DatasetBase* hint,
                      int64_t* first, int64_t* second) {
  IteratorContext::Params params(ctx);
  ResourceMgr resource_mgr;
  params.resource_mgr = &resource_mgr;
  CancellationManager cancellation_manager(ctx->cancellation_manager());
  params.cancellation_manager = &cancellation_manager;
  IteratorContext iter_ctx(std::move(params));
  std::unique_ptr<IteratorBase> iterator;
  TF_RETURN_IF_ERROR(
      hint->MakeIterator(&iter_ctx, /*parent=*/nullptr, "LIRSHint", &iterator));
  for (int64_t* out : {first, second}) {
    std::vector<Tensor> element;
    bool end = false;
    TF_RETURN_IF_ERROR(iterator->GetNext(&iter_ctx, &element, &end));
    if (end || element.size() != 1 || element[0].dtype() != DT_INT64 ||
        element[0].NumElements() != 1) {
      return absl::InvalidArgumentError(
          "LIRSShardHintDataset: its input must give two int64 scalars");
    }
    *out = element[0].scalar<int64_t>()();
  }
  return absl::OkStatus();
}

}  // namespace

void LIRSDatasetOp::MakeDataset(OpKernelContext* ctx, DatasetBase** output) {
  std::vector<Tensor> inputs;
  for (int i = 0; i < ctx->num_inputs(); ++i) inputs.push_back(ctx->input(i));
  const Tensor *file_names, *offset_tables;
  OP_REQUIRES_OK(ctx, ctx->input("filenames", &file_names));
  OP_REQUIRES_OK(ctx, ctx->input("offset_tables", &offset_tables));
  std::vector<std::string> files, tables;
  OP_REQUIRES_OK(ctx,
                 lirs::StringList(*file_names, lirs::attr::kFileNames, &files));
  OP_REQUIRES_OK(ctx, lirs::StringList(*offset_tables, lirs::attr::kOffsetTables,
                                       &tables));
  rust::Vec<ffi::NamedValue> args = attrs_;
  std::vector<const char*> names = {"page_aware", "seed", "seed2"};
  DatasetBase* hint = nullptr;
  absl::Status pending;
  if (hint_) {
    // Shard k of W: the pair Rust checks as num_shards=W, shard_index=k.
    OP_REQUIRES_OK(ctx, GetDatasetFromVariantTensor(ctx->input(0), &hint));
    int64_t first = 0, second = 1;
    pending = ReadHint(ctx, hint, &first, &second);
    if (!pending.ok()) {
      first = 0;
      second = 1;
    }
    OP_REQUIRES_OK(ctx, lirs::AddNamedValue("num_shards",
                                            Tensor(second - first), &args));
    OP_REQUIRES_OK(ctx, lirs::AddNamedValue("shard_index", Tensor(first), &args));
  } else {
    names.push_back("num_shards");
    names.push_back("shard_index");
  }
  for (const char* name : names) {
    const Tensor* t;
    OP_REQUIRES_OK(ctx, ctx->input(name, &t));
    OP_REQUIRES_OK(ctx, lirs::AddNamedValue(name, *t, &args));
  }
  std::unique_ptr<rust::Box<LirsDataset>> dataset;
  OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                   dataset = std::make_unique<rust::Box<LirsDataset>>(
                       ffi::open_dataset(args, lirs::FilePaths(files),
                                         lirs::FilePaths(tables), st));
                 }));
  int64_t seed = 0, seed2 = 0;
  OP_REQUIRES_OK(ctx, ParseScalarArgument(ctx, "seed", &seed));
  OP_REQUIRES_OK(ctx, ParseScalarArgument(ctx, "seed2", &seed2));
  int seed_generator_input = 0, stop = 0;
  OP_REQUIRES_OK(ctx, ctx->op_kernel().InputRange("seed_generator",
                                                  &seed_generator_input, &stop));
  std::unique_ptr<lirs::SeedGeneratorRef> seeds;
  OP_REQUIRES_OK(ctx, lirs::SeedGeneratorRef::Make(ctx, seed_generator_input, seed,
                                                   seed2, reshuffle_, &seeds));
  // A new generator skips the draws of the iterations before start_epoch (Rust
  // says how many samples); a shared one already did.
  const int64_t skipped = (*dataset)->first_random_samples();
  if (seeds->owned() && skipped > 0) {
    seeds->generator()->set_num_random_samples(skipped);
    seeds->generator()->Reset();
  }
  *output = new Dataset(ctx, *this, std::move(inputs), std::move(*dataset),
                        std::move(seeds), seed, seed2, seed_generator_input,
                        hint, std::move(pending));
}

namespace {
REGISTER_KERNEL_BUILDER(Name("LIRSDataset").Device(DEVICE_CPU), LIRSDatasetOp);
REGISTER_KERNEL_BUILDER(Name(kHintOp).Device(DEVICE_CPU), LIRSDatasetOp);
}  // namespace

}  // namespace data
}  // namespace tensorflow
